// AVX2 implementation of the recipe's matrix product: the 16 recipe lanes
// live in two ymm registers (lanes 0-7 and 8-15), so the first step of the
// reduction tree is simply their sum.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/kquant_chunk_sse.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/weight_decode.hpp"

namespace kvg::detail {

namespace {

struct Lanes {
  __m256 lo, hi;
};

inline Lanes zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
inline Lanes load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
inline Lanes fmadd(Lanes a, Lanes b, Lanes c) {
  return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}

inline float reduce(Lanes v) {
  const __m256 s8 = _mm256_add_ps(v.lo, v.hi);                                           // i + (i+8)
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));  // i + (i+4)
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));                                // i + (i+2)
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));                            // 0 + 1
  return _mm_cvtss_f32(s1);
}

inline __m256 widen_i8(__m128i q8) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)); }

template <WeightType kType>
inline Lanes load_weights(const uint8_t* row, int64_t k) {
  if constexpr (kType == WeightType::F32) {
    return load(reinterpret_cast<const float*>(row) + k);
  } else if constexpr (kType == WeightType::F16) {
    const uint8_t* p = row + size_t(k) * 2;
    return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)))};
  } else if constexpr (kType == WeightType::BF16) {
    const uint8_t* p = row + size_t(k) * 2;
    const __m256i lo = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256i hi = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(lo, 16)), _mm256_castsi256_ps(_mm256_slli_epi32(hi, 16))};
  } else if constexpr (kType == WeightType::Q8_0) {
    const uint8_t* block = row + size_t(k / 32) * 34;
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(load_u16(block)));  // F16C: exact
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2 + (k % 32)));
    return {_mm256_mul_ps(d, widen_i8(q)), _mm256_mul_ps(d, widen_i8(_mm_srli_si128(q, 8)))};
  } else if constexpr (kType == WeightType::Q4_0) {
    const uint8_t* block = row + size_t(k / 32) * 18;
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(load_u16(block)));  // F16C: exact
    __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
    if (k % 32) bytes = _mm_srli_epi16(bytes, 4);
    const __m128i q = _mm_sub_epi8(_mm_and_si128(bytes, _mm_set1_epi8(0x0f)), _mm_set1_epi8(8));
    return {_mm256_mul_ps(d, widen_i8(q)), _mm256_mul_ps(d, widen_i8(_mm_srli_si128(q, 8)))};
  } else if constexpr (kquant_simd<kType>) {
    const KQuantChunk c = decode_kquant_chunk<kType>(row, k);
    const __m256 scale = _mm256_set1_ps(c.scale);
    Lanes v{_mm256_mul_ps(scale, widen_i8(c.q)), _mm256_mul_ps(scale, widen_i8(_mm_srli_si128(c.q, 8)))};
    if constexpr (kquant_has_offset<kType>) {
      const __m256 offset = _mm256_set1_ps(c.offset);
      v = {_mm256_sub_ps(v.lo, offset), _mm256_sub_ps(v.hi, offset)};
    }
    return v;
  } else {  // formats without a vector decoder: the shared scalar one
    alignas(32) float tmp[kLanes];
    decode_chunk(kType, row, k, kLanes, tmp);
    return load(tmp);
  }
}

template <WeightType kType, int T, int R>
void tile(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t t0, int64_t r0, float* y,
          int64_t y_stride) {
  Lanes acc[T][R];
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) acc[t][r] = zero();
  const float* xs[T];
  for (int t = 0; t < T; ++t) xs[t] = x + (t0 + t) * x_stride;

  const int64_t full = w.cols / kLanes * kLanes;
  for (int64_t k = 0; k < full; k += kLanes) {
    Lanes xv[T];
    for (int t = 0; t < T; ++t) xv[t] = load(xs[t] + k);
    for (int r = 0; r < R; ++r) {
      const Lanes wv = load_weights<kType>(w.row(r0 + r), k);
      for (int t = 0; t < T; ++t) acc[t][r] = fmadd(xv[t], wv, acc[t][r]);
    }
  }
  if (full < w.cols) {  // zero-padded tail chunk, decoded by the shared scalar code
    const int n = int(w.cols - full);
    alignas(32) float wk[kLanes];
    alignas(32) float xk[kLanes];
    for (int t = 0; t < T; ++t) {
      std::fill(xk, xk + kLanes, 0.0f);
      std::copy(xs[t] + full, xs[t] + w.cols, xk);
      const Lanes xv = load(xk);
      for (int r = 0; r < R; ++r) {
        decode_chunk(kType, w.row(r0 + r), full, n, wk);
        acc[t][r] = fmadd(xv, load(wk), acc[t][r]);
      }
    }
  }
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) y[(t0 + t) * y_stride + r0 + r] = reduce(acc[t][r]);
}

template <WeightType kType, int T>
void token_tile(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t t0, int64_t r0, int64_t r1,
                float* y, int64_t y_stride) {
  constexpr int kRows = T == 1 ? 4 : 2;
  int64_t r = r0;
  for (; r + kRows <= r1; r += kRows) tile<kType, T, kRows>(w, x, x_stride, t0, r, y, y_stride);
  for (; r < r1; ++r) tile<kType, T, 1>(w, x, x_stride, t0, r, y, y_stride);
}

template <WeightType kType>
void block(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t t0, int64_t t1, int64_t r0,
           int64_t r1, float* y, int64_t y_stride) {
  int64_t t = t0;
  for (; t + 2 <= t1; t += 2) token_tile<kType, 2>(w, x, x_stride, t, r0, r1, y, y_stride);
  if (t < t1) token_tile<kType, 1>(w, x, x_stride, t, r0, r1, y, y_stride);
}

}  // namespace

void matmul_block_avx2(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t t0, int64_t t1,
                       int64_t r0, int64_t r1, float* y, int64_t y_stride) {
  with_weight_type(w.type, [&](auto type) { block<decltype(type)::value>(w, x, x_stride, t0, t1, r0, r1, y, y_stride); });
}

float dot_avx2(const float* a, const float* b, int64_t n) {
  Lanes acc = zero();
  int64_t k = 0;
  for (; k + kLanes <= n; k += kLanes) acc = fmadd(load(a + k), load(b + k), acc);
  if (k < n) {
    alignas(32) float ak[kLanes] = {}, bk[kLanes] = {};
    std::copy(a + k, a + n, ak);
    std::copy(b + k, b + n, bk);
    acc = fmadd(load(ak), load(bk), acc);
  }
  return reduce(acc);
}

}  // namespace kvg::detail
