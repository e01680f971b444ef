// AVX-512 implementation of the recipe's matrix product: one zmm register is
// exactly the 16 lanes of the recipe, so each accumulator register is one dot
// product in flight. Tiles of T tokens x R rows share their loads.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/kquant_chunk_sse.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/prefetch_rows.hpp"
#include "kernels/cpu/weight_decode.hpp"

namespace kvg::detail {

namespace {

inline float reduce(__m512 v) {
  const __m256 lo = _mm512_castps512_ps256(v);
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  const __m256 s8 = _mm256_add_ps(lo, hi);                                              // i + (i+8)
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));  // i + (i+4)
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));                                // i + (i+2)
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));                            // 0 + 1
  return _mm_cvtss_f32(s1);
}

// F16C conversion: exact, and the same value as kvg::f16_to_f32.
inline float q_scale(const uint8_t* block) { return _cvtsh_ss(load_u16(block)); }

// Loads the full chunk of 16 weights at element k (k + 16 <= cols).
template <WeightType kType>
inline __m512 load_weights(const uint8_t* row, int64_t k) {
  if constexpr (kType == WeightType::F32) {
    return _mm512_loadu_ps(row + size_t(k) * 4);
  } else if constexpr (kType == WeightType::F16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + size_t(k) * 2)));
  } else if constexpr (kType == WeightType::BF16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + size_t(k) * 2));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else if constexpr (kType == WeightType::Q8_0) {
    const uint8_t* block = row + size_t(k / 32) * 34;
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2 + (k % 32)));
    return _mm512_mul_ps(_mm512_set1_ps(q_scale(block)), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)));
  } else if constexpr (kType == WeightType::Q4_0) {
    const uint8_t* block = row + size_t(k / 32) * 18;
    __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
    if (k % 32) bytes = _mm_srli_epi16(bytes, 4);
    const __m128i nibbles = _mm_and_si128(bytes, _mm_set1_epi8(0x0f));
    const __m512i q = _mm512_sub_epi32(_mm512_cvtepu8_epi32(nibbles), _mm512_set1_epi32(8));
    return _mm512_mul_ps(_mm512_set1_ps(q_scale(block)), _mm512_cvtepi32_ps(q));
  } else if constexpr (kquant_simd<kType>) {
    const KQuantChunk c = decode_kquant_chunk<kType>(row, k);
    const __m512 v = _mm512_mul_ps(_mm512_set1_ps(c.scale), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(c.q)));
    if constexpr (kquant_has_offset<kType>) return _mm512_sub_ps(v, _mm512_set1_ps(c.offset));
    return v;
  } else {  // formats without a vector decoder: the shared scalar one
    alignas(64) float tmp[kLanes];
    decode_chunk(kType, row, k, kLanes, tmp);
    return _mm512_load_ps(tmp);
  }
}

template <WeightType kType, int T, int R>
void tile(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t t0, int64_t r0, float* y,
          int64_t y_stride) {
  // Fully unrolled so every accumulator stays in a register.
  __m512 acc[T][R];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc[t][r] = _mm512_setzero_ps();
  const uint8_t* rows[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) rows[r] = w.row(r0 + r);
  const float* xs[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) xs[t] = x + (t0 + t) * x_stride;

  const int64_t full = w.cols / kLanes * kLanes;
  for (int64_t k = 0; k < full; k += kLanes) {
    __m512 xv[T];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) xv[t] = _mm512_loadu_ps(xs[t] + k);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 wv = load_weights<kType>(rows[r], k);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) acc[t][r] = _mm512_fmadd_ps(xv[t], wv, acc[t][r]);
    }
  }
  if (full < w.cols) {  // zero-padded tail chunk, decoded by the shared scalar code
    const int n = int(w.cols - full);
    const __mmask16 mask = __mmask16((1u << n) - 1);
    alignas(64) float wk[kLanes];
    for (int r = 0; r < R; ++r) {
      decode_chunk(kType, rows[r], full, n, wk);
      const __m512 wv = _mm512_load_ps(wk);
      for (int t = 0; t < T; ++t)
        acc[t][r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, xs[t] + full), wv, acc[t][r]);
    }
  }
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) y[(t0 + t) * y_stride + r0 + r] = reduce(acc[t][r]);
}

// Decode (one token) over Q8_0 rows: a whole 32-element block per step, so
// the block's scale is converted once for its two 16-lane chunks.
template <int R>
void tile_q8_one_token(const WeightMatrix& w, const float* x, int64_t t0, int64_t r0, float* y, int64_t y_stride,
                       int64_t x_stride) {
  __m512 acc[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  const float* xs = x + t0 * x_stride;
  const uint8_t* block[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) block[r] = w.row(r0 + r);
  for (int64_t k = 0; k < w.cols; k += 32) {
    const __m512 x0 = _mm512_loadu_ps(xs + k), x1 = _mm512_loadu_ps(xs + k + 16);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      if constexpr (R > 1) prefetch_next_group(block[r], w.row_bytes, R, 34);
      const __m512 d = _mm512_set1_ps(q_scale(block[r]));
      const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block[r] + 2));
      const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block[r] + 18));
      acc[r] = _mm512_fmadd_ps(x0, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0))), acc[r]);
      acc[r] = _mm512_fmadd_ps(x1, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1))), acc[r]);
      block[r] += 34;
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) y[t0 * y_stride + r0 + r] = reduce(acc[r]);
}

// Decode (one token) over K-quant rows: a whole 256-element block of a row per
// step, its 16 chunk scales formed once up front, so the inner loop is pure
// vector work. Each row still adds its chunks in increasing k, as tile() does.
template <WeightType kType, int R>
void tile_kquant_one_token(const WeightMatrix& w, const float* x, int64_t t0, int64_t r0, float* y,
                           int64_t y_stride, int64_t x_stride) {
  __m512 acc[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  const float* xs = x + t0 * x_stride;
  for (int64_t b = 0; b < w.cols / 256; ++b) {
    const float* xb = xs + b * 256;
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const uint8_t* block = w.row(r0 + r) + size_t(b) * kquant_block_bytes<kType>;
      if constexpr (R > 1) prefetch_next_group(block, w.row_bytes, R, kquant_block_bytes<kType>);
      alignas(64) float scale[16], offset[16];
      // Q4_K and Q5_K scale sub-blocks of 32 (two chunks), the others of 16.
      constexpr int kStep = kType == WeightType::Q4_K || kType == WeightType::Q5_K ? 2 : 1;
      for (int c = 0; c < 16; c += kStep) {
        kquant_scale<kType>(block, c * 16, &scale[c], &offset[c]);
        if constexpr (kStep == 2) scale[c + 1] = scale[c], offset[c + 1] = offset[c];
      }
#pragma GCC unroll 16
      for (int c = 0; c < 16; ++c) {
        __m512 v = _mm512_mul_ps(_mm512_set1_ps(scale[c]),
                                 _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(kquant_ints<kType>(block, c * 16))));
        if constexpr (kquant_has_offset<kType>) v = _mm512_sub_ps(v, _mm512_set1_ps(offset[c]));
        acc[r] = _mm512_fmadd_ps(_mm512_loadu_ps(xb + c * 16), v, acc[r]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) y[t0 * y_stride + r0 + r] = reduce(acc[r]);
}

template <WeightType kType, int T>
void token_tile(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t t0, int64_t r0, int64_t r1,
                float* y, int64_t y_stride) {
  // With one token the product is bound by weight traffic: more rows in flight.
  constexpr int kRows = T == 1 ? 8 : 4;
  int64_t r = r0;
  if constexpr (kType == WeightType::Q8_0 && T == 1) {
    for (; r + kRows <= r1; r += kRows) tile_q8_one_token<kRows>(w, x, t0, r, y, y_stride, x_stride);
    for (; r < r1; ++r) tile_q8_one_token<1>(w, x, t0, r, y, y_stride, x_stride);
    return;
  }
  if constexpr (kquant_simd<kType> && T == 1) {  // K-quant rows are whole blocks (cols % 256 == 0)
    for (; r + 4 <= r1; r += 4) tile_kquant_one_token<kType, 4>(w, x, t0, r, y, y_stride, x_stride);
    for (; r < r1; ++r) tile_kquant_one_token<kType, 1>(w, x, t0, r, y, y_stride, x_stride);
    return;
  }
  for (; r + kRows <= r1; r += kRows) tile<kType, T, kRows>(w, x, x_stride, t0, r, y, y_stride);
  for (; r < r1; ++r) tile<kType, T, 1>(w, x, x_stride, t0, r, y, y_stride);
}

template <WeightType kType>
void block(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t t0, int64_t t1, int64_t r0,
           int64_t r1, float* y, int64_t y_stride) {
  // Row groups outside, token tiles inside: a group's few rows stay in the
  // L1 cache while every token of the block passes over them.
  // (With a handful of tokens the weights are used once anyway: no groups.)
  const int64_t row_group = t1 - t0 >= 6 ? 4 : r1 - r0;
  for (int64_t ra = r0; ra < r1; ra += row_group) {
    const int64_t rb = std::min(r1, ra + row_group);
    int64_t t = t0;
    for (; t + 6 <= t1; t += 6) token_tile<kType, 6>(w, x, x_stride, t, ra, rb, y, y_stride);
    switch (t1 - t) {
      case 5: token_tile<kType, 5>(w, x, x_stride, t, ra, rb, y, y_stride); break;
      case 4: token_tile<kType, 4>(w, x, x_stride, t, ra, rb, y, y_stride); break;
      case 3: token_tile<kType, 3>(w, x, x_stride, t, ra, rb, y, y_stride); break;
      case 2: token_tile<kType, 2>(w, x, x_stride, t, ra, rb, y, y_stride); break;
      case 1: token_tile<kType, 1>(w, x, x_stride, t, ra, rb, y, y_stride); break;
      default: break;
    }
  }
}

}  // namespace

void matmul_block_avx512(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t t0, int64_t t1,
                         int64_t r0, int64_t r1, float* y, int64_t y_stride) {
  with_weight_type(w.type, [&](auto type) { block<decltype(type)::value>(w, x, x_stride, t0, t1, r0, r1, y, y_stride); });
}

namespace {
template <WeightType kType>
void dequantize_rows(const WeightMatrix& w, int64_t r0, int64_t r1, float* out) {
  const int64_t full = w.cols / kLanes * kLanes;
  for (int64_t r = r0; r < r1; ++r, out += w.cols) {
    const uint8_t* row = w.row(r);
    for (int64_t k = 0; k < full; k += kLanes) _mm512_storeu_ps(out + k, load_weights<kType>(row, k));
    if (full < w.cols) {
      alignas(64) float tail[kLanes];
      decode_chunk(kType, row, full, int(w.cols - full), tail);
      std::copy(tail, tail + (w.cols - full), out + full);
    }
  }
}
}  // namespace

void dequantize_rows_avx512(const WeightMatrix& w, int64_t r0, int64_t r1, float* out) {
  with_weight_type(w.type, [&](auto type) { dequantize_rows<decltype(type)::value>(w, r0, r1, out); });
}

float dot_avx512(const float* a, const float* b, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + kLanes <= n; k += kLanes) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + k), _mm512_loadu_ps(b + k), acc);
  if (k < n) {
    const __mmask16 mask = __mmask16((1u << (n - k)) - 1);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, a + k), _mm512_maskz_loadu_ps(mask, b + k), acc);
  }
  return reduce(acc);
}

}  // namespace kvg::detail
