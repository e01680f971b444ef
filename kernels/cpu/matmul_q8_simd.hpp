// How a SIMD kernel of recipe q8-portable-v1 covers rows [r0, r1): the
// few-token kernel where it applies (q8_decode_path), token panels otherwise.
// V and D are the ISA's traits (matmul_q8_panel_kernel.hpp,
// matmul_q8_decode_kernel.hpp).
//
// Only included from translation units compiled with at least -mavx2 -mf16c.
#pragma once

#include "kernels/cpu/matmul_q8.hpp"
#include "kernels/cpu/matmul_q8_decode_kernel.hpp"
#include "kernels/cpu/matmul_q8_panel_kernel.hpp"

namespace kvg::detail {
// (Unnamed namespace: one copy per ISA's translation unit.)
namespace {

template <class V, class D>
void q8_simd_rows(const WeightMatrix& w, const Q8Activations& a, const Q8Panels& panels, int64_t r0, int64_t r1,
                  float* y, int64_t y_stride) {
  with_weight_type(w.type, [&](auto type) {
    constexpr WeightType kType = decltype(type)::value;
    if constexpr (kQ8DecodeKernel<kType>)
      if (q8_decode_path(kType, a.n_tokens)) return decode_matmul<D, kType>(w, a, r0, r1, y, y_stride);
    panel_matmul<V>(w, panels, a.n_tokens, r0, r1, y, y_stride);
  });
}

}  // namespace
}  // namespace kvg::detail
