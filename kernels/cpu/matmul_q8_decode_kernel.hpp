// The few-token body of recipe q8-portable-v1's matrix product for the
// formats of Q8_0 and Q4_K_M files (Q8_0, Q4_K, Q6_K), shared by the AVX2 and
// AVX-512 kernels through a dot-product traits class D. With one token the
// product is bound by weight traffic and token panels would leave most lanes
// idle: here each row block's integer products fill the 8 lanes of a ymm
// register, eight rows' registers are summed across their lanes by one
// transposing tree (exact integer additions), and the float steps then run
// for those eight rows side by side, one lane per row, block after block in
// the spec's order. Same bits as the scalar kernel.
//
// D provides dot_u8s8(acc, v, q) (acc + the 4-element products of unsigned
// bytes v <= 128 and signed bytes q, per int32 lane) and dot_s8s8(acc, v, q)
// (the same for signed v, plus kS8Bias * the 4-element sums of q).
//
// Only included from translation units compiled with at least -mavx2 -mf16c.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/activation_quant.hpp"
#include "kernels/cpu/kquant_chunk_sse.hpp"
#include "kernels/cpu/prefetch_rows.hpp"
#include "kernels/cpu/q8_weight_ints.hpp"

namespace kvg::detail {
// (Unnamed namespace: each translation unit, compiled for its own ISA, keeps
// its own copy; the linker must not merge them across ISAs.)
namespace {

template <WeightType kType>
constexpr bool kQ8DecodeKernel = kType == WeightType::Q8_0 || kType == WeightType::Q4_K || kType == WeightType::Q6_K;

// One row block's contribution before the lanes are summed.
struct RowBlockTerms {
  __m256i i1;  // lanes summing to I1 (Q8_0: plus D::kS8Bias * S)
  __m256i i2;  // lanes summing to I2 where the format has one
  float d, d2;
};


// One token's block b, shared by the rows of a group.
struct BlockActs {
  const int8_t* q;       // the block's int8 values
  const int16_t* sums16; // its sums of 16
  __m256i s32;           // Q4_K: the 8 sums of 32, one per lane
};

inline __m256i load32(const void* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Lanes each holding a sum of 4 products below 2^15 in magnitude, times a
// scale per lane (as int16 pairs (scale, 0)): one vpmaddwd, exact.
inline __m256i scale_small_lanes(__m256i p, __m256i scale_pairs) { return _mm256_madd_epi16(p, scale_pairs); }

template <class D, WeightType kType>
inline RowBlockTerms row_block_terms(const uint8_t* block, const BlockActs& a) {
  RowBlockTerms t;
  t.d2 = 0.0f;
  if constexpr (kType == WeightType::Q8_0) {
    t.i1 = D::dot_s8s8(_mm256_setzero_si256(), load32(block + 2), load32(a.q));
    t.d = f16(block);
  } else if constexpr (kType == WeightType::Q4_K) {
    // The 8 scales and 8 mins (6 bits each) from the 12 packed bytes read as
    // three words, as q8_unpack.hpp reads them; one int32 lane each.
    uint32_t w[3];
    std::memcpy(w, block + 4, 12);
    const uint64_t scales8 = uint64_t(w[0] & 0x3f3f3f3fu) |
                             uint64_t((w[2] & 0x0f0f0f0fu) | (((w[0] >> 6) & 0x03030303u) << 4)) << 32;
    const uint64_t mins8 = uint64_t(w[1] & 0x3f3f3f3fu) |
                           uint64_t(((w[2] >> 4) & 0x0f0f0f0fu) | (((w[1] >> 6) & 0x03030303u) << 4)) << 32;
    const __m256i scales = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(int64_t(scales8)));
    const __m256i mask = _mm256_set1_epi8(0x0f);
    __m256i acc = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {  // 32 bytes: sub-block 2c in the low nibbles, 2c + 1 in the high
      const __m256i bytes = load32(block + 16 + 32 * c);
      // Each lane: 4 products of at most 15 * 127, so the int16 scaling is exact.
      const __m256i lo = D::dot_u8s8(_mm256_setzero_si256(), _mm256_and_si256(bytes, mask), load32(a.q + 64 * c));
      const __m256i hi = D::dot_u8s8(_mm256_setzero_si256(), _mm256_and_si256(_mm256_srli_epi16(bytes, 4), mask),
                                     load32(a.q + 64 * c + 32));
      acc = _mm256_add_epi32(acc, scale_small_lanes(lo, _mm256_permutevar8x32_epi32(scales, _mm256_set1_epi32(2 * c))));
      acc = _mm256_add_epi32(acc, scale_small_lanes(hi, _mm256_permutevar8x32_epi32(scales, _mm256_set1_epi32(2 * c + 1))));
    }
    t.i1 = acc;
    t.i2 = _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(int64_t(mins8))), a.s32);  // lane j: min_j S_j
    t.d = f16(block);
    t.d2 = f16(block + 2);
  } else {
    static_assert(kType == WeightType::Q6_K);
    // q6 in [0, 63] as unsigned bytes: Σ (q6 - 32) q = Σ q6 q - 32 S over
    // each sub-block of 16, so I1 = Σ_j sc_j Σ q6 q - 32 Σ_j sc_j S_j.
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 192)));
    const __m256i low4 = _mm256_set1_epi8(0x0f), low2 = _mm256_set1_epi8(0x03);
    __m256i acc = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i a0 = load32(block + 64 * h), b0 = load32(block + 64 * h + 32), hb = load32(block + 128 + 32 * h);
      const __m256i q6[4] = {
          _mm256_or_si256(_mm256_and_si256(a0, low4), _mm256_slli_epi16(_mm256_and_si256(hb, low2), 4)),
          _mm256_or_si256(_mm256_and_si256(b0, low4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), low2), 4)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a0, 4), low4),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), low2), 4)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b0, 4), low4),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), low2), 4))};
      // This half's 8 scales (int16) in both 128-bit halves of the register.
      const __m256i half_scales = _mm256_permute4x64_epi64(sc16, h ? 0xee : 0x44);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {  // elements [128h + 32k, +32): sub-blocks 8h + 2k (lanes 0-3), 8h + 2k + 1 (4-7)
        const __m256i p = D::dot_u8s8(_mm256_setzero_si256(), q6[k], load32(a.q + 128 * h + 32 * k));
        // (scale, 0) pairs: bytes 4k, 4k+1 of the half's scales for lanes 0-3, 4k+2, 4k+3 for lanes 4-7.
        const char lo0 = char(4 * k), lo1 = char(4 * k + 1), hi0 = char(4 * k + 2), hi1 = char(4 * k + 3), z = char(0x80);
        const __m256i pick = _mm256_setr_epi8(lo0, lo1, z, z, lo0, lo1, z, z, lo0, lo1, z, z, lo0, lo1, z, z,
                                              hi0, hi1, z, z, hi0, hi1, z, z, hi0, hi1, z, z, hi0, hi1, z, z);
        // Each lane: 4 products of at most 63 * 127, so the int16 scaling is exact.
        acc = _mm256_add_epi32(acc, scale_small_lanes(p, _mm256_shuffle_epi8(half_scales, pick)));
      }
    }
    const __m256i sc_s = _mm256_madd_epi16(sc16, load32(a.sums16));  // Σ_j sc_j S_j, in 8 lanes
    t.i1 = _mm256_sub_epi32(acc, _mm256_slli_epi32(sc_s, 5));
    t.d = f16(block + 208);
  }
  return t;
}

// The lane sums of v[0..8), in order, in one register.
inline __m256i sum_lanes8(const __m256i v[8]) {
  __m256i pair[4], quad[2];
  for (int i = 0; i < 4; ++i)  // [a0+a2, b0+b2, a1+a3, b1+b3 | a4+a6, b4+b6, a5+a7, b5+b7]
    pair[i] = _mm256_add_epi32(_mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]), _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 2; ++i)  // [a0-3, b0-3, c0-3, d0-3 | a4-7, b4-7, c4-7, d4-7]
    quad[i] = _mm256_add_epi32(_mm256_unpacklo_epi64(pair[2 * i], pair[2 * i + 1]),
                               _mm256_unpackhi_epi64(pair[2 * i], pair[2 * i + 1]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(quad[0], quad[1], 0x20),
                          _mm256_permute2x128_si256(quad[0], quad[1], 0x31));
}

// Rows [r0, r0 + n_rows) (n_rows <= 8) for every token of a.
template <class D, WeightType kType>
void decode_rows8(const WeightMatrix& w, const Q8Activations& a, int64_t r0, int n_rows, float* y, int64_t y_stride) {
  using W = Q8Weights<kType>;
  const uint8_t* rows[8];
  for (int r = 0; r < 8; ++r) rows[r] = w.row(r0 + std::min(r, n_rows - 1));  // a short group repeats its last row
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    const int8_t* q = a.q_row(t);
    const int16_t* sums16 = a.sums16_row(t);
    const float* dx = a.dx_row(t);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < a.blocks(); ++b) {
      BlockActs acts{q + b * W::kBlock, sums16 + b * (W::kBlock / 16), _mm256_setzero_si256()};
      if constexpr (kType == WeightType::Q4_K) acts.s32 = _mm256_madd_epi16(load32(acts.sums16), _mm256_set1_epi16(1));
      __m256i lanes1[8], lanes2[8];
      alignas(32) float d[8], d2[8];
#pragma GCC unroll 8
      for (int r = 0; r < 8; ++r) {
        // Eight row streams: the hardware prefetcher alone leaves decode
        // waiting on memory, so ask for every cache line of the next group's.
        prefetch_next_group(rows[r] + b * W::kBytes, w.row_bytes, 8, W::kBytes);
        const RowBlockTerms terms = row_block_terms<D, kType>(rows[r] + b * W::kBytes, acts);
        lanes1[r] = terms.i1, lanes2[r] = terms.i2, d[r] = terms.d, d2[r] = terms.d2;
      }
      __m256i i1 = sum_lanes8(lanes1);
      if constexpr (kType == WeightType::Q8_0 && D::kS8Bias != 0)
        i1 = _mm256_sub_epi32(i1, _mm256_set1_epi32(D::kS8Bias * (acts.sums16[0] + acts.sums16[1])));
      const __m256 dxv = _mm256_set1_ps(dx[b]);
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1), _mm256_mul_ps(_mm256_load_ps(d), dxv), acc);
      if constexpr (W::kSecond == Q8Second::MinusMins)  // -(I2 * (dmin * dx)) + acc, one rounding
        acc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(sum_lanes8(lanes2)), _mm256_mul_ps(_mm256_load_ps(d2), dxv), acc);
    }
    alignas(32) float out[8];
    _mm256_store_ps(out, acc);
    for (int r = 0; r < n_rows; ++r) y[t * y_stride + r0 + r] = out[r];
  }
}

// Rows [r0, r1) for every token of a.
template <class D, WeightType kType>
void decode_matmul(const WeightMatrix& w, const Q8Activations& a, int64_t r0, int64_t r1, float* y, int64_t y_stride) {
  for (int64_t r = r0; r < r1; r += 8) decode_rows8<D, kType>(w, a, r, int(std::min<int64_t>(8, r1 - r)), y, y_stride);
}

}  // namespace
}  // namespace kvg::detail
