// AVX2 kernel of recipe q8-portable-v1: panels of 8 tokens (one ymm lane
// each). Without VNNI the 4-element products use the sign trick: |v| as
// unsigned bytes times q * sign(v) (vpmaddubsw: pairs of at most 2 * 128 *
// 127, no saturation), then pairs to int32 (vpmaddwd): exact.
#include <immintrin.h>

#include "kernels/cpu/matmul_q8_simd.hpp"

namespace kvg::detail {

namespace {

struct Avx2Vec {
  static constexpr int kLanes = 8;
  static constexpr int kOffset = 0;
  static constexpr bool kAbs = true;
  using I = __m256i;
  using F = __m256;
  static I zero() { return _mm256_setzero_si256(); }
  static I set1(int32_t v) { return _mm256_set1_epi32(v); }
  static I load(const void* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static I add(I a, I b) { return _mm256_add_epi32(a, b); }
  static I mul_scalar(I a, int32_t s) { return _mm256_mullo_epi32(a, _mm256_set1_epi32(s)); }
  // Group g's 4 weights and their magnitudes, in every lane.
  struct Weights { I v, abs; };
  static Weights weights4(const Q8Unpacked& u, int g) {
    return {_mm256_set1_epi32(load_i32(u.v + 4 * g)), _mm256_set1_epi32(load_i32(u.absv + 4 * g))};
  }
  static I dot4(I acc, I panel, Weights w) {
    const I pairs = _mm256_maddubs_epi16(w.abs, _mm256_sign_epi8(panel, w.v));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
  static I madd_pairs(I acc, I pairs, int32_t pair) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi32(pair)));
  }
  static F zerof() { return _mm256_setzero_ps(); }
  static F cvt(I v) { return _mm256_cvtepi32_ps(v); }
  static F loadf(const float* p) { return _mm256_loadu_ps(p); }
  static F mulf(F a, float s) { return _mm256_mul_ps(a, _mm256_set1_ps(s)); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F fnmadd(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }  // -(a*b) + c, one rounding: fma(-a, b, c)
  static void storef(float* p, F v) { _mm256_store_ps(p, v); }
};

// Few-token products: the sign trick on 32 bytes.
struct Avx2Dot {
  static constexpr int kS8Bias = 0;
  static __m256i dot_u8s8(__m256i acc, __m256i v, __m256i q) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(v, q), _mm256_set1_epi16(1)));
  }
  static __m256i dot_s8s8(__m256i acc, __m256i v, __m256i q) {
    return dot_u8s8(acc, _mm256_abs_epi8(v), _mm256_sign_epi8(q, v));
  }
};

}  // namespace

void matmul_q8_block_avx2(const WeightMatrix& w, const Q8Activations& a, const Q8Panels& panels, int64_t r0,
                          int64_t r1, float* y, int64_t y_stride) {
  q8_simd_rows<Avx2Vec, Avx2Dot>(w, a, panels, r0, r1, y, y_stride);
}

}  // namespace kvg::detail
