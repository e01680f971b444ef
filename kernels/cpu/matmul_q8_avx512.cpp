// AVX-512 kernel of recipe q8-portable-v1 (needs AVX512-VNNI; matmul_q8.cpp
// runs the AVX2 kernel on AVX-512 CPUs without it): panels of 16 tokens, one
// zmm lane each. The panel holds q + 128 as unsigned bytes, so vpdpbusd
// multiplies them with the signed weight bytes directly; the block's
// correction 128 * Σ scale_j Σ v removes the offset, exactly.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/matmul_q8.hpp"
#include "kernels/cpu/matmul_q8_decode_kernel.hpp"
#include "kernels/cpu/matmul_q8_panel_kernel.hpp"

namespace kvg::detail {

namespace {

inline int32_t load4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

struct Avx512VnniVec {
  static constexpr int kLanes = 16;
  static constexpr int kOffset = 128;
  static constexpr bool kAbs = false;
  using I = __m512i;
  using F = __m512;
  static I zero() { return _mm512_setzero_si512(); }
  static I set1(int32_t v) { return _mm512_set1_epi32(v); }
  static I load(const void* p) { return _mm512_loadu_si512(p); }
  static I add(I a, I b) { return _mm512_add_epi32(a, b); }
  static I mul_scalar(I a, int32_t s) { return _mm512_mullo_epi32(a, _mm512_set1_epi32(s)); }
  static I weights4(const Q8Unpacked& u, int g) { return _mm512_set1_epi32(load4(u.v + 4 * g)); }
  static I dot4(I acc, I panel, I weights) { return _mm512_dpbusd_epi32(acc, panel, weights); }
  static I madd_pairs(I acc, I pairs, int32_t pair) { return _mm512_dpwssd_epi32(acc, pairs, _mm512_set1_epi32(pair)); }
  static F zerof() { return _mm512_setzero_ps(); }
  static F cvt(I v) { return _mm512_cvtepi32_ps(v); }
  static F loadf(const float* p) { return _mm512_loadu_ps(p); }
  static F mulf(F a, float s) { return _mm512_mul_ps(a, _mm512_set1_ps(s)); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F fnmadd(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }  // -(a*b) + c, one rounding: fma(-a, b, c)
  static void storef(float* p, F v) { _mm512_store_ps(p, v); }
};

// Few-token products: vpdpbusd on ymm registers; signed weights are made
// unsigned by + 128 (the caller removes 128 * Σ q).
struct VnniDot {
  static constexpr int kS8Bias = 128;
  static __m256i dot_u8s8(__m256i acc, __m256i v, __m256i q) { return _mm256_dpbusd_epi32(acc, v, q); }
  static __m256i dot_s8s8(__m256i acc, __m256i v, __m256i q) {
    return _mm256_dpbusd_epi32(acc, _mm256_xor_si256(v, _mm256_set1_epi8(char(0x80))), q);
  }
};

}  // namespace

void matmul_q8_block_avx512(const WeightMatrix& w, const Q8Activations& a, const Q8Panels& panels, int64_t r0,
                            int64_t r1, float* y, int64_t y_stride) {
  with_weight_type(w.type, [&](auto type) {
    constexpr WeightType kType = decltype(type)::value;
    if constexpr (kQ8DecodeKernel<kType>)
      if (q8_decode_path(kType, a.n_tokens)) return decode_matmul<VnniDot, kType>(w, a, r0, r1, y, y_stride);
    panel_matmul<Avx512VnniVec>(w, panels, a.n_tokens, r0, r1, y, y_stride);
  });
}

}  // namespace kvg::detail
