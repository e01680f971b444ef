// AVX-512 element-wise operations: the scalar ones' exact operations, 16 lanes
// at a time (exp_f32_avx512 is exp_f32 lane for lane), so the same bits.
#include <immintrin.h>

#include "kernels/cpu/exp_avx512.hpp"
#include "kernels/cpu/ops.hpp"

namespace kvg::detail {

// silu(g) * u = (g / (1 + exp_f32(-g))) * u, each operation rounded.
void swiglu_avx512(const float* gate, const float* up, float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 e = exp_f32_avx512(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, e));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, up + i)));
  }
}

}  // namespace kvg::detail
