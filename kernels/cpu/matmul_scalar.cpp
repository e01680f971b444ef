// The reference implementation of the recipe's dot product: plain C++ that
// every SIMD path must match bit for bit.
#include <cmath>

#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/weight_decode.hpp"

namespace kvg::detail {

namespace {

float dot_row(const WeightMatrix& w, const uint8_t* row, const float* x) {
  float acc[kLanes] = {};
  float wk[kLanes];
  for (int64_t k = 0; k < w.cols; k += kLanes) {
    const int n = int(std::min<int64_t>(kLanes, w.cols - k));
    decode_chunk(w.type, row, k, n, wk);
    // Lanes past the end are skipped: fma(0, 0, acc) == acc, which is what
    // the SIMD paths compute with their zero padding.
    for (int i = 0; i < n; ++i) acc[i] = std::fma(x[k + i], wk[i], acc[i]);
  }
  return reduce_lanes(acc);
}

}  // namespace

void matmul_block_scalar(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t t0, int64_t t1,
                         int64_t r0, int64_t r1, float* y, int64_t y_stride) {
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    for (int64_t t = t0; t < t1; ++t) y[t * y_stride + r] = dot_row(w, row, x + t * x_stride);
  }
}

float dot_scalar(const float* a, const float* b, int64_t n) {
  float acc[kLanes] = {};
  for (int64_t k = 0; k < n; ++k) acc[k % kLanes] = std::fma(a[k], b[k], acc[k % kLanes]);
  return reduce_lanes(acc);
}

}  // namespace kvg::detail
