// The executable definition of recipe q8-portable-v1's matrix product
// (docs/recipe.md): one output element at a time, block after block, each
// integer part summed as the spec's table writes it. Every SIMD path (and
// the CUDA kernels) must give these bits.
#include <cmath>

#include "kernels/cpu/matmul_q8.hpp"
#include "kernels/cpu/q8_weight_ints.hpp"

namespace kvg::detail {

namespace {

// Σ over the sub-block of `size` elements starting at element e0 of the
// block of q (exact: |Σ| <= 32 * 127), from the quantizer's sums of 16.
int sub_block_sum(const int16_t* sums16, int e0, int size) {
  int s = 0;
  for (int j = e0 / 16; j < (e0 + size) / 16; ++j) s += sums16[j];
  return s;
}

template <WeightType kType>
float dot_row(const uint8_t* row, const Q8Activations& a, int64_t t) {
  using W = Q8Weights<kType>;
  const int8_t* q_row = a.q_row(t);
  const float* dx_row = a.dx_row(t);
  const int16_t* sums_row = a.sums16_row(t);
  float acc = 0.0f;
  for (int64_t b = 0; b < a.blocks(); ++b) {
    const uint8_t* block = row + size_t(b) * W::kBytes;
    const int8_t* q = q_row + b * W::kBlock;
    const int16_t* sums16 = sums_row + b * (W::kBlock / 16);
    const float dx = dx_row[b];
    int32_t i1 = 0;
    if constexpr (W::kScaleSub == 0) {
      for (int e = 0; e < W::kBlock; ++e) i1 += W::value(block, e) * q[e];
    } else {
      for (int j = 0; j < W::kBlock / W::kScaleSub; ++j) {
        int32_t part = 0;
        for (int e = j * W::kScaleSub; e < (j + 1) * W::kScaleSub; ++e) part += W::value(block, e) * q[e];
        i1 += W::scale(block, j) * part;
      }
    }
    acc = std::fma(float(i1), W::d(block) * dx, acc);
    if constexpr (W::kSecond != Q8Second::None) {
      int32_t i2 = 0;
      for (int j = 0; j < W::kBlock / W::kMinSub; ++j)
        i2 += W::min(block, j) * sub_block_sum(sums16, j * W::kMinSub, W::kMinSub);
      const float term = W::kSecond == Q8Second::PlusSum ? float(i2) : -float(i2);
      acc = std::fma(term, W::d2(block) * dx, acc);
    }
  }
  return acc;
}

}  // namespace

void matmul_q8_block_scalar(const WeightMatrix& w, const Q8Activations& a, const Q8Panels&, int64_t r0, int64_t r1,
                            float* y, int64_t y_stride) {
  with_weight_type(w.type, [&](auto type) {
    constexpr WeightType kType = decltype(type)::value;
    if constexpr (kQ8Format<kType>)
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t t = 0; t < a.n_tokens; ++t) y[t * y_stride + r] = dot_row<kType>(w.row(r), a, t);
  });
}

}  // namespace kvg::detail
