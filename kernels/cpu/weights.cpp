#include "kernels/cpu/weights.hpp"

#include <algorithm>

#include "kernels/cpu/weight_decode.hpp"

namespace kvg {

const char* weight_type_name(WeightType t) {
  switch (t) {
    case WeightType::F32: return "f32";
    case WeightType::F16: return "f16";
    case WeightType::BF16: return "bf16";
    case WeightType::Q8_0: return "q8_0";
    case WeightType::Q4_0: return "q4_0";
  }
  return "?";
}

int weight_block_elements(WeightType t) {
  return t == WeightType::Q8_0 || t == WeightType::Q4_0 ? 32 : 1;
}

int weight_block_bytes(WeightType t) {
  switch (t) {
    case WeightType::F32: return 4;
    case WeightType::F16:
    case WeightType::BF16: return 2;
    case WeightType::Q8_0: return 34;
    case WeightType::Q4_0: return 18;
  }
  return 0;
}

void dequantize_row(const WeightMatrix& w, int64_t r, float* out) {
  float chunk[detail::kLanes];
  for (int64_t k = 0; k < w.cols; k += detail::kLanes) {
    const int n = int(std::min<int64_t>(detail::kLanes, w.cols - k));
    detail::decode_chunk(w.type, w.row(r), k, n, chunk);
    std::copy(chunk, chunk + n, out + k);
  }
}

}  // namespace kvg
