// exp_f32 (kernels/cpu/portable_math.hpp) for 16 lanes at once: the same
// operations in the same order, so each lane gets exactly the scalar bits.
// Include only from translation units compiled with AVX-512 enabled.
#pragma once

#include <immintrin.h>

namespace kvg::detail {

inline __m512 exp_f32_avx512(__m512 x) {
  const __m512 shifter = _mm512_set1_ps(12582912.0f);
  const __m512 n = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), shifter), shifter);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0.693359375f), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
  p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
  // Lanes outside [-86, 88] get garbage here and are replaced below.
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
  __m512 result = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
  result = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(88.0f), _CMP_GT_OQ), result,
                                _mm512_set1_ps(__builtin_inff()));
  result = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-86.0f), _CMP_LT_OQ), result,
                                _mm512_setzero_ps());
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), result, x);
}

}  // namespace kvg::detail
