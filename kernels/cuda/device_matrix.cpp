#include "kernels/cuda/device_matrix.hpp"

namespace kvg::cuda {

DeviceMatrix upload_matrix(const WeightMatrix& w, const Stream& stream) {
  DeviceMatrix m;
  const size_t bytes = size_t(w.rows) * w.row_bytes;
  m.bytes = DeviceBuffer(bytes);
  copy_to_device(m.bytes.data(), w.data, bytes, stream);
  m.view = w;
  m.view.data = m.bytes.as<const uint8_t>();
  return m;
}

DeviceBuffer upload_floats(std::span<const float> values, const Stream& stream) {
  DeviceBuffer b(values.size_bytes());
  copy_to_device(b.data(), values.data(), values.size_bytes(), stream);
  return b;
}

}  // namespace kvg::cuda
