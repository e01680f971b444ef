// AVX-512 kernel of recipe q8-portable-v1 (needs AVX512-VNNI; matmul_q8.cpp
// runs the AVX2 kernel on AVX-512 CPUs without it). Three layouts, by the
// number of tokens: one Q8_0 token runs eight rows across the lanes
// (q8_0_decode_rows8); 2..16 Q8_0 tokens run two rows per register over
// 8-token panels (q8_0_pair_rows8); everything else runs panels of 16
// tokens, one zmm lane each. Such a panel holds q + 128 as unsigned bytes,
// so vpdpbusd multiplies them with the signed weight bytes directly; the
// block's correction 128 * Σ scale_j Σ v removes the offset, exactly.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/matmul_q8_simd.hpp"

namespace kvg::detail {

namespace {

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
  static I weights4(const Q8Unpacked& u, int g) { return _mm512_set1_epi32(load_i32(u.v + 4 * g)); }
  // Signed weights: (q + 128) times weights; unsigned ones: weights times q.
  template <bool kUnsigned>
  static I dot4(I acc, I panel, I weights) {
    return kUnsigned ? _mm512_dpbusd_epi32(acc, weights, panel) : _mm512_dpbusd_epi32(acc, panel, weights);
  }
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

// Few-token Q8_0 on zmm registers: two blocks of a row per vpdpbusd (their
// lanes kept apart: lanes 0-7 block b, 8-15 block b + 1), so one transposing
// tree sums 16 row blocks, and the eight rows' block scales come in by one
// gather per block. The float steps are decode_rows8's, block b then b + 1.
// Rows r and r + 1's lanes summed in pairs: each 128-bit chunk k holds
// [r's 4k..4k+1, r+1's 4k..4k+1, r's 4k+2..4k+3, r+1's 4k+2..4k+3] summed.
__attribute__((always_inline)) inline __m512i sum_pair(__m512i a, __m512i b) {
  return _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
}
// Taking the eight rows' lanes as values, not an array: so they stay in
// registers (an array of eight zmm went through the stack every block).
__attribute__((always_inline)) inline __m512i sum_lanes8x2(__m512i v0, __m512i v1, __m512i v2, __m512i v3,
                                                            __m512i v4, __m512i v5, __m512i v6, __m512i v7) {
  const __m512i pair[4] = {sum_pair(v0, v1), sum_pair(v2, v3), sum_pair(v4, v5), sum_pair(v6, v7)};
  __m512i quad[2];
  for (int i = 0; i < 2; ++i)  // 128-bit chunk k of quad[i]: rows 4i..4i+3, sums of lanes 4k..4k+3
    quad[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(pair[2 * i], pair[2 * i + 1]),
                               _mm512_unpackhi_epi64(pair[2 * i], pair[2 * i + 1]));
  const __m512i even = _mm512_shuffle_i64x2(quad[0], quad[1], _MM_SHUFFLE(2, 0, 2, 0));
  const __m512i odd = _mm512_shuffle_i64x2(quad[0], quad[1], _MM_SHUFFLE(3, 1, 3, 1));
  // [rows 0-3 of b, rows 0-3 of b+1, rows 4-7 of b, rows 4-7 of b+1] -> [rows 0-7 of b | rows 0-7 of b+1]
  const __m512i sums = _mm512_add_epi32(even, odd);
  return _mm512_shuffle_i64x2(sums, sums, _MM_SHUFFLE(3, 1, 2, 0));
}

// The f16 d of block b of the eight rows, as floats. Eight word inserts,
// not a gather: this CPU's (Zen 5) gather cost a tenth of the row-pair
// kernel's time per block.
inline __m256 q8_0_scales(const uint8_t* const (&rows)[8], int64_t b) {
  const auto d = [&](int r) { uint16_t v; std::memcpy(&v, rows[r] + b * 34, 2); return int(v); };
  __m128i words = _mm_cvtsi32_si128(d(0));
  words = _mm_insert_epi16(words, d(1), 1);
  words = _mm_insert_epi16(words, d(2), 2);
  words = _mm_insert_epi16(words, d(3), 3);
  words = _mm_insert_epi16(words, d(4), 4);
  words = _mm_insert_epi16(words, d(5), 5);
  words = _mm_insert_epi16(words, d(6), 6);
  words = _mm_insert_epi16(words, d(7), 7);
  return _mm256_cvtph_ps(words);
}

void q8_0_decode_rows8(const WeightMatrix& w, const Q8Activations& a, int64_t r0, int n_rows, float* y,
                       int64_t y_stride) {
  const uint8_t* rows[8];
  for (int r = 0; r < 8; ++r) rows[r] = w.row(r0 + std::min(r, n_rows - 1));  // a short group repeats its last row
  const __m512i flip = _mm512_set1_epi8(char(0x80));
  const int64_t nb = a.blocks();
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    const int8_t* q = a.q_row(t);
    const int16_t* sums16 = a.sums16_row(t);
    const float* dx = a.dx_row(t);
    __m256 acc = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      const __m512i qv = _mm512_loadu_si512(q + 32 * b);
      const auto lane = [&](int r) {  // row r's two blocks times q, + 128 * Σ q
        const uint8_t* block = rows[r] + b * 34;
        prefetch_next_group(block, w.row_bytes, 8, 68);  // both blocks' bytes
        const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(load32(block + 2)), load32(block + 36), 1);
        return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_xor_si512(v, flip), qv);
      };
      const int32_t s0 = VnniDot::kS8Bias * (sums16[2 * b] + sums16[2 * b + 1]);
      const int32_t s1 = VnniDot::kS8Bias * (sums16[2 * b + 2] + sums16[2 * b + 3]);
      const __m512i i1 =
          _mm512_sub_epi32(sum_lanes8x2(lane(0), lane(1), lane(2), lane(3), lane(4), lane(5), lane(6), lane(7)),
                           _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(s0)), _mm256_set1_epi32(s1), 1));
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm512_castsi512_si256(i1)),
                            _mm256_mul_ps(q8_0_scales(rows, b), _mm256_set1_ps(dx[b])), acc);
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm512_extracti64x4_epi64(i1, 1)),
                            _mm256_mul_ps(q8_0_scales(rows, b + 1), _mm256_set1_ps(dx[b + 1])), acc);
    }
    if (b < nb) {  // an odd last block
      __m256i lanes[8];
      for (int r = 0; r < 8; ++r)
        lanes[r] = VnniDot::dot_s8s8(_mm256_setzero_si256(), load32(rows[r] + b * 34 + 2), load32(q + 32 * b));
      const int32_t s0 = VnniDot::kS8Bias * (sums16[2 * b] + sums16[2 * b + 1]);
      const __m256i i1 = _mm256_sub_epi32(sum_lanes8(lanes), _mm256_set1_epi32(s0));
      const __m256 scale = _mm256_mul_ps(q8_0_scales(rows, b), _mm256_set1_ps(dx[b]));
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1), scale, acc);
    }
    alignas(32) float out[8];
    _mm256_store_ps(out, acc);
    for (int r = 0; r < n_rows; ++r) y[t * y_stride + r0 + r] = out[r];
  }
}

// Small batches of Q8_0 (q8_pair_path: 2..16 tokens) run on token panels
// of 8 lanes holding q itself, with two rows per zmm: lanes 0-7 are row 2p's
// products with the panel's tokens, lanes 8-15 row 2p + 1's. A 16-lane panel
// would leave half its lanes empty at 8 tokens and unpack every block for
// them; here the weights go from the block straight to the multiplier. Four
// groups of a row pair's block sit once in each 128-bit lane (row 2p's in the
// low half, row 2p + 1's in the high), made unsigned by + 128, and vpshufd
// picks group k in every lane; the + 128 adds 128 * Σ q, which each block's
// start value removes (-128 times the token's block sum, from its sum pair).
// Eight rows' integer sums are exact; the float steps are the spec's, per
// lane, block after block: the scalar kernel's bits.
constexpr int kPairsPerGroup = 4;  // eight rows

// Groups [4h, 4h + 4) of block b of rows lo and hi, + 128.
inline __m512i pair_groups(const uint8_t* lo, const uint8_t* hi, int64_t b, int h) {
  const int64_t at = b * 34 + 2 + 16 * h;
  const __m512i l = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lo + at)));
  const __m512i r = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(hi + at)));
  return _mm512_xor_si512(_mm512_shuffle_i64x2(l, r, _MM_SHUFFLE(0, 0, 0, 0)), _mm512_set1_epi8(char(0x80)));
}

// i1 += group 4h + k of every pair times the panels' tokens.
template <int k, int kPanels>
[[gnu::always_inline]] inline void pair_group_products(const Q8Panels& pn, int64_t g, const __m512i (&groups)[kPairsPerGroup],
                                                       __m512i (&i1)[kPairsPerGroup][kPanels]) {
  __m512i panel[kPanels];
  #pragma GCC unroll 8
  for (int p = 0; p < kPanels; ++p)  // 8 tokens' 4 bytes, in both halves
    panel[p] = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pn.q_group(p, g + k))));
  #pragma GCC unroll 8
  for (int r = 0; r < kPairsPerGroup; ++r) {
    const __m512i weights = _mm512_shuffle_epi32(groups[r], _MM_PERM_ENUM(k * 0x55));
    #pragma GCC unroll 8
    for (int p = 0; p < kPanels; ++p) i1[r][p] = _mm512_dpbusd_epi32(i1[r][p], weights, panel[p]);
  }
}

template <int kPanels>
void q8_0_pair_rows8(const WeightMatrix& w, const Q8Panels& pn, int64_t n_tokens, int64_t r0, int n_rows, float* y,
                     int64_t y_stride) {
  const uint8_t* rows[2 * kPairsPerGroup];
  #pragma GCC unroll 8
  for (int r = 0; r < 2 * kPairsPerGroup; ++r) rows[r] = w.row(r0 + std::min(r, n_rows - 1));  // a short group repeats its last row
  const __m512i minus_128_pair = _mm512_set1_epi32(int32_t(uint32_t(uint16_t(-128)) * 0x10001u));
  __m512 acc[kPairsPerGroup][kPanels];
  #pragma GCC unroll 8
  for (auto& pair : acc)
    #pragma GCC unroll 8
    for (auto& a : pair) a = _mm512_setzero_ps();
  for (int64_t b = 0; b < pn.blocks; ++b) {
    #pragma GCC unroll 8
    for (int r = 0; r < 2 * kPairsPerGroup; ++r) prefetch_next_group(rows[r] + b * 34, w.row_bytes, 8, 34);
    __m512i i1[kPairsPerGroup][kPanels];
    #pragma GCC unroll 8
    for (int p = 0; p < kPanels; ++p) {  // -128 * Σ q of each token's block: (lo + hi) 16-sums
      const __m512i pairs = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pn.sum_pair(p, b))));
      const __m512i start = _mm512_dpwssd_epi32(_mm512_setzero_si512(), pairs, minus_128_pair);
      #pragma GCC unroll 8
      for (int r = 0; r < kPairsPerGroup; ++r) i1[r][p] = start;
    }
    #pragma GCC unroll 8
    for (int h = 0; h < 2; ++h) {
      __m512i groups[kPairsPerGroup];
      #pragma GCC unroll 8
      for (int r = 0; r < kPairsPerGroup; ++r) groups[r] = pair_groups(rows[2 * r], rows[2 * r + 1], b, h);
      const int64_t g = 8 * b + 4 * h;
      pair_group_products<0, kPanels>(pn, g, groups, i1);
      pair_group_products<1, kPanels>(pn, g, groups, i1);
      pair_group_products<2, kPanels>(pn, g, groups, i1);
      pair_group_products<3, kPanels>(pn, g, groups, i1);
    }
    const __m512 d8 = _mm512_castps256_ps512(q8_0_scales(rows, b));
    #pragma GCC unroll 8
    for (int p = 0; p < kPanels; ++p) {
      const __m512 dx = _mm512_castsi512_ps(
          _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pn.dx_block(p, b)))));
      #pragma GCC unroll 8
      for (int r = 0; r < kPairsPerGroup; ++r) {
        const __m512i which = _mm512_inserti64x4(_mm512_set1_epi32(2 * r), _mm256_set1_epi32(2 * r + 1), 1);
        const __m512 scale = _mm512_mul_ps(_mm512_permutexvar_ps(which, d8), dx);
        acc[r][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i1[r][p]), scale, acc[r][p]);
      }
    }
  }
  #pragma GCC unroll 8
  for (int r = 0; r < kPairsPerGroup; ++r)
    #pragma GCC unroll 8
    for (int p = 0; p < kPanels; ++p) {
      alignas(64) float out[16];
      _mm512_store_ps(out, acc[r][p]);
      for (int l = 0; l < 8 && 8 * p + l < n_tokens; ++l)
        for (int half = 0; half < 2; ++half)
          if (2 * r + half < n_rows) y[(8 * p + l) * y_stride + r0 + 2 * r + half] = out[8 * half + l];
    }
}

}  // namespace

void matmul_q8_block_avx512(const WeightMatrix& w, const Q8Activations& a, const Q8Panels& panels, int64_t r0,
                            int64_t r1, float* y, int64_t y_stride) {
  if (w.type == WeightType::Q8_0 && panels.lanes == kQ8PairLanes) {
    for (int64_t r = r0; r < r1; r += 8) {
      const int n_rows = int(std::min<int64_t>(8, r1 - r));
      if (panels.n_panels == 1) q8_0_pair_rows8<1>(w, panels, a.n_tokens, r, n_rows, y, y_stride);
      else q8_0_pair_rows8<2>(w, panels, a.n_tokens, r, n_rows, y, y_stride);
    }
    return;
  }
  if (w.type == WeightType::Q8_0 && q8_decode_path(w.type, a.n_tokens)) {
    for (int64_t r = r0; r < r1; r += 8) q8_0_decode_rows8(w, a, r, int(std::min<int64_t>(8, r1 - r)), y, y_stride);
    return;
  }
  q8_simd_rows<Avx512VnniVec, VnniDot>(w, a, panels, r0, r1, y, y_stride);
}

}  // namespace kvg::detail
