// SSE4.1 decoding of one 16-element chunk of a K-quant row into its 16 small
// integers plus the chunk's float scale and offset: the vector twin of
// decode_chunk() (weight_decode.hpp), shared by the AVX2 and AVX-512 kernels.
//
// Why it exists: without it the SIMD kernels fell back to the scalar decoder
// for K-quants, which made decode on Q4_K_M files (Q4_K + Q6_K) ~20x slower
// than on Q8_0. The float steps are the same as decode_chunk's — the scale and
// offset are formed by the same scalar products, then every element is
// scale * float(q) - offset (or scale * float(q) where the format has no
// offset), each step rounded once — so the weights, and the bits, are equal.
//
// Only included from translation units compiled with at least -mavx2 -mf16c.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/weight_decode.hpp"
#include "kernels/quant_bits.hpp"

namespace kvg::detail {

// 16 integer weights (int8, lane i = element k+i) and how they map to floats.
struct KQuantChunk {
  __m128i q;
  float scale;
  float offset;  // subtracted after the product; has_offset says whether it applies
};

template <WeightType kType>
constexpr bool kquant_has_offset = kType == WeightType::Q4_K || kType == WeightType::Q5_K || kType == WeightType::Q2_K;

template <WeightType kType>
constexpr bool kquant_simd = kType == WeightType::Q4_K || kType == WeightType::Q6_K || kType == WeightType::Q5_K ||
                             kType == WeightType::Q3_K || kType == WeightType::Q2_K;

// F16C conversion: exact, the same value as kvg::f16_to_f32 without its
// branches (which cost more than the rest of a chunk's decoding).
inline float f16(const uint8_t* p) { return _cvtsh_ss(load_u16(p)); }

inline __m128i load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

// (bytes >> shift) & mask per byte (SSE has no byte shift: shift 16-bit
// lanes, then the mask drops the bits that crossed in from the neighbour).
inline __m128i bits(__m128i bytes, int shift, int mask) {
  return _mm_and_si128(_mm_srl_epi16(bytes, _mm_cvtsi32_si128(shift)), _mm_set1_epi8(char(mask)));
}

template <WeightType kType>
constexpr int kquant_block_bytes = kType == WeightType::Q4_K   ? 144
                                   : kType == WeightType::Q6_K ? 210
                                   : kType == WeightType::Q5_K ? 176
                                   : kType == WeightType::Q3_K ? 110
                                                               : 84;

// The 16 integers of the chunk at element e (multiple of 16) of a block.
template <WeightType kType>
inline __m128i kquant_ints(const uint8_t* block, int e) {
  if constexpr (kType == WeightType::Q4_K) {
    return bits(load16(block + 16 + (e / 64) * 32 + (e % 32)), (e % 64) >= 32 ? 4 : 0, 0x0f);
  } else if constexpr (kType == WeightType::Q6_K) {
    const int half = e / 128, quarter = (e % 128) / 32, l0 = e % 32;
    const __m128i low = bits(load16(block + half * 64 + (quarter & 1) * 32 + l0), quarter < 2 ? 0 : 4, 0x0f);
    const __m128i high = bits(load16(block + 128 + half * 32 + l0), 2 * quarter, 3);
    return _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(high, 4)), _mm_set1_epi8(32));
  } else if constexpr (kType == WeightType::Q5_K) {
    const int sub = e / 32, l0 = e % 32;
    const __m128i nib = bits(load16(block + 48 + (e / 64) * 32 + l0), (sub & 1) ? 4 : 0, 0x0f);
    const __m128i fifth = bits(load16(block + 16 + l0), sub, 1);
    return _mm_or_si128(nib, _mm_slli_epi16(fifth, 4));
  } else if constexpr (kType == WeightType::Q3_K) {
    const int half = e / 128, j = (e % 128) / 32, l0 = e % 32;
    const __m128i low = bits(load16(block + 32 + half * 32 + l0), 2 * j, 3);
    const __m128i high = bits(load16(block + l0), half * 4 + j, 1);
    // q = low - 4 where the high bit is clear: low - 4 + 4 * high.
    return _mm_add_epi8(_mm_sub_epi8(low, _mm_set1_epi8(4)), _mm_slli_epi16(high, 2));
  } else {
    static_assert(kType == WeightType::Q2_K);
    const int half = e / 128, j = (e % 128) / 32, l0 = e % 32;
    return bits(load16(block + 16 + half * 32 + l0), 2 * j, 3);
  }
}

// The scale and offset of the chunk at element e of a block: the same
// scalar products as decode_chunk().
template <WeightType kType>
inline void kquant_scale(const uint8_t* block, int e, float* scale, float* offset) {
  if constexpr (kType == WeightType::Q4_K || kType == WeightType::Q5_K) {
    int sc, mn;
    q4k_scale_min(block + 4, e / 32, &sc, &mn);
    *scale = f16(block) * float(sc);
    *offset = f16(block + 2) * float(mn);
  } else if constexpr (kType == WeightType::Q6_K) {
    *scale = f16(block + 208) * float(int8_t(block[192 + e / 16]));  // sub-blocks of 16: index = chunk
    *offset = 0.0f;
  } else if constexpr (kType == WeightType::Q3_K) {
    const int half = e / 128, j = (e % 128) / 32, l0 = e % 32;
    *scale = f16(block + 108) * float(q3k_scale(block + 96, half * 8 + j * 2 + (l0 >= 16)) - 32);
    *offset = 0.0f;
  } else {
    static_assert(kType == WeightType::Q2_K);
    const int half = e / 128, j = (e % 128) / 32, l0 = e % 32;
    const int sc = block[half * 8 + j * 2 + (l0 >= 16)];
    *scale = f16(block + 80) * float(sc & 0x0f);
    *offset = f16(block + 82) * float(sc >> 4);
  }
}

// Chunk at element k of the row (k multiple of 16, k + 16 <= cols).
template <WeightType kType>
inline KQuantChunk decode_kquant_chunk(const uint8_t* row, int64_t k) {
  const uint8_t* block = row + size_t(k / 256) * kquant_block_bytes<kType>;
  const int e = int(k % 256);
  KQuantChunk c;
  c.q = kquant_ints<kType>(block, e);
  kquant_scale<kType>(block, e, &c.scale, &c.offset);
  return c;
}

}  // namespace kvg::detail
