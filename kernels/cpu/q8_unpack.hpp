// Weight blocks unpacked for the SIMD kernels of recipe q8-portable-v1: the
// block's small integers as int8 (the spec's wq, nib - 8, q5, q6 - 32, ...),
// its integer sub-block scales and mins, and its f16 scales widened — decoded
// once per block and then multiplied with every token of a tile. The values
// are Q8Weights' (q8_weight_ints.hpp); Q8_0, Q4_K and Q6_K, the formats of
// Q8_0 and Q4_K_M files, have vector unpackers, the rest the scalar one.
//
// Only included from translation units compiled with at least -mavx2 -mf16c.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/kquant_chunk_sse.hpp"
#include "kernels/cpu/q8_weight_ints.hpp"

namespace kvg::detail {
// (Unnamed namespace: each translation unit, compiled for its own ISA, keeps
// its own copy; the linker must not merge them across ISAs.)
namespace {

struct alignas(64) Q8Unpacked {
  int8_t v[256];      // element e's integer (signed)
  uint8_t absv[256];  // |v[e]|, for kernels that multiply magnitudes (filled when asked)
  int32_t scale[16];  // integer scale of sub-block j (kScaleSub elements), where the format has them
  int32_t minpair[8]; // the mins of elements [32k, 32k+16) (low 16 bits) and [32k+16, 32k+32) (high)
  int32_t correction; // offset * Σ_j scale_j Σ_{e in j} v[e]: what q + offset adds to I1
  float d, d2;
};

// 4 bytes as one int32 (to broadcast a group of 4 weights).
inline int32_t load_i32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline int32_t hsum_sad(__m256i sad) {  // the four 64-bit sums of _mm256_sad_epu8
  const __m128i s = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
  return int32_t(_mm_cvtsi128_si64(s) + _mm_extract_epi64(s, 1));
}

// Σ of 32 int8 at p.
inline int32_t sum_i8x32(const int8_t* p) {
  const __m256i v = _mm256_xor_si256(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)), _mm256_set1_epi8(char(0x80)));
  return hsum_sad(_mm256_sad_epu8(v, _mm256_setzero_si256())) - 32 * 128;
}

// Σ of 16 int8 at p.
inline int32_t sum_i8x16(const int8_t* p) {
  const __m128i v = _mm_xor_si128(_mm_load_si128(reinterpret_cast<const __m128i*>(p)), _mm_set1_epi8(char(0x80)));
  const __m128i s = _mm_sad_epu8(v, _mm_setzero_si128());
  return int32_t(_mm_cvtsi128_si64(s) + _mm_extract_epi64(s, 1)) - 16 * 128;
}

// The integers of the block into u.v (and its scales into u.scale, mins into
// u.minpair) — everything but correction, d, d2.
template <WeightType kType>
inline void unpack_ints(const uint8_t* block, Q8Unpacked& u) {
  using W = Q8Weights<kType>;
  if constexpr (kType == WeightType::Q8_0) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(u.v), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2)));
  } else if constexpr (kType == WeightType::Q4_K) {
    for (int c = 0; c < 4; ++c) {  // 32 bytes hold elements [64c, 64c+32) (low nibbles) and [64c+32, 64c+64)
      const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 16 + 32 * c));
      const __m256i mask = _mm256_set1_epi8(0x0f);
      _mm256_store_si256(reinterpret_cast<__m256i*>(u.v + 64 * c), _mm256_and_si256(bytes, mask));
      _mm256_store_si256(reinterpret_cast<__m256i*>(u.v + 64 * c + 32), _mm256_and_si256(_mm256_srli_epi16(bytes, 4), mask));
    }
    // The 12 bytes of 6-bit scales and mins as three little-endian words
    // (q4k_scale_min, four sub-blocks per word).
    uint32_t w[3];
    std::memcpy(w, block + 4, 12);
    const uint32_t scales_lo = w[0] & 0x3f3f3f3fu, mins_lo = w[1] & 0x3f3f3f3fu;
    const uint32_t scales_hi = (w[2] & 0x0f0f0f0fu) | (((w[0] >> 6) & 0x03030303u) << 4);
    const uint32_t mins_hi = ((w[2] >> 4) & 0x0f0f0f0fu) | (((w[1] >> 6) & 0x03030303u) << 4);
    for (int j = 0; j < 4; ++j) {
      u.scale[j] = int32_t((scales_lo >> (8 * j)) & 0xff);
      u.scale[j + 4] = int32_t((scales_hi >> (8 * j)) & 0xff);
      const int32_t m_lo = int32_t((mins_lo >> (8 * j)) & 0xff), m_hi = int32_t((mins_hi >> (8 * j)) & 0xff);
      u.minpair[j] = m_lo | (m_lo << 16);
      u.minpair[j + 4] = m_hi | (m_hi << 16);
    }
  } else if constexpr (kType == WeightType::Q6_K) {
    for (int e = 0; e < 256; e += 16) _mm_store_si128(reinterpret_cast<__m128i*>(u.v + e), kquant_ints<kType>(block, e));
    for (int j = 0; j < 16; ++j) u.scale[j] = W::scale(block, j);
  } else {
    for (int e = 0; e < W::kBlock; ++e) u.v[e] = int8_t(W::value(block, e));
    if constexpr (W::kScaleSub != 0)
      for (int j = 0; j < W::kBlock / W::kScaleSub; ++j) u.scale[j] = W::scale(block, j);
    if constexpr (W::kSecond != Q8Second::None)
      for (int k = 0; k < W::kBlock / 32; ++k) {
        const int lo = W::min(block, (32 * k) / W::kMinSub), hi = W::min(block, (32 * k + 16) / W::kMinSub);
        u.minpair[k] = lo | (hi << 16);
      }
  }
}

// The whole unpacked block; `offset` is what the kernel's activation bytes
// add to q (128 for unsigned-times-signed products, else 0).
template <WeightType kType, int kOffset, bool kAbs>
inline void unpack_block(const uint8_t* block, Q8Unpacked& u) {
  using W = Q8Weights<kType>;
  unpack_ints<kType>(block, u);
  if constexpr (kAbs)
    for (int e = 0; e < W::kBlock; e += 32)
      _mm256_store_si256(reinterpret_cast<__m256i*>(u.absv + e),
                         _mm256_abs_epi8(_mm256_load_si256(reinterpret_cast<const __m256i*>(u.v + e))));
  u.correction = 0;
  if constexpr (kOffset != 0) {
    int32_t c = 0;
    if constexpr (W::kScaleSub == 0) {
      c = sum_i8x32(u.v);
    } else if constexpr (W::kScaleSub == 32) {
      for (int j = 0; j < 8; ++j) c += u.scale[j] * sum_i8x32(u.v + 32 * j);
    } else {
      for (int j = 0; j < 16; ++j) c += u.scale[j] * sum_i8x16(u.v + 16 * j);
    }
    u.correction = kOffset * c;
  }
  u.d = f16(block + W::kDAt);  // F16C: the same value as W::d, without its branches
  if constexpr (W::kSecond != Q8Second::None) u.d2 = f16(block + W::kD2At);
}

}  // namespace
}  // namespace kvg::detail
