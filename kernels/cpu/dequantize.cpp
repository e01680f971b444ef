#include "kernels/cpu/dequantize.hpp"

#include <algorithm>

#include "kernels/cpu/weight_decode.hpp"

namespace kvg {

void dequantize_row(const WeightMatrix& w, int64_t r, float* out) {
  float chunk[detail::kLanes];
  for (int64_t k = 0; k < w.cols; k += detail::kLanes) {
    const int n = int(std::min<int64_t>(detail::kLanes, w.cols - k));
    detail::decode_chunk(w.type, w.row(r), k, n, chunk);
    std::copy(chunk, chunk + n, out + k);
  }
}

}  // namespace kvg
