// Weights on the device, stored exactly as on the host: the same bytes in the
// same format, so quantized matrices stay quantized and are dequantized
// inside the kernels (exactly, see kernels/cpu/weights.hpp).
#pragma once

#include <span>

#include "kernels/cpu/weights.hpp"
#include "kernels/cuda/device_memory.hpp"

namespace kvg::cuda {

struct DeviceMatrix {
  DeviceBuffer bytes;
  WeightMatrix view;  // view.data points into `bytes` (device memory)
};

// Copies w's rows to the device (asynchronously on `stream`; `w` must stay
// mapped until the stream is synchronised).
DeviceMatrix upload_matrix(const WeightMatrix& w, const Stream& stream);

// Copies a vector of floats (a norm's weights) to the device.
DeviceBuffer upload_floats(std::span<const float> values, const Stream& stream);

}  // namespace kvg::cuda
