// Scalar decoding of one 16-element chunk of a weight row: the definition of
// what every SIMD decoder must reproduce, and the tail path they all share.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cpu/float16.hpp"
#include "kernels/cpu/weights.hpp"

namespace kvg::detail {

// Chunks of 16 are the recipe's lane width (docs/recipe.md).
constexpr int kLanes = 16;

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// One decoder per weight type, each writing out[0..n) of the chunk that starts
// at element k. They are forced inline: decode_chunk is called per 16-chunk
// from the matmul kernels' inner loops, often with a constant type, and the
// switch below must fold into them as when it held these bodies itself.
// Every line of arithmetic is the recipe's (docs/recipe.md); do not reorder.

[[gnu::always_inline]] inline void decode_f32(const uint8_t* row, int64_t k, int n, float out[kLanes]) {
  std::memcpy(out, row + size_t(k) * 4, size_t(n) * 4);
}

[[gnu::always_inline]] inline void decode_f16(const uint8_t* row, int64_t k, int n, float out[kLanes]) {
  for (int i = 0; i < n; ++i) out[i] = f16_to_f32(load_u16(row + size_t(k + i) * 2));
}

[[gnu::always_inline]] inline void decode_bf16(const uint8_t* row, int64_t k, int n, float out[kLanes]) {
  for (int i = 0; i < n; ++i) out[i] = bf16_to_f32(load_u16(row + size_t(k + i) * 2));
}

// Block: f16 scale, 32 x int8.
[[gnu::always_inline]] inline void decode_q8_0(const uint8_t* row, int64_t k, int n, float out[kLanes]) {
  const uint8_t* block = row + size_t(k / 32) * 34;
  const float d = f16_to_f32(load_u16(block));
  const int8_t* q = reinterpret_cast<const int8_t*>(block + 2 + (k % 32));
  for (int i = 0; i < n; ++i) out[i] = d * float(q[i]);
}

// Block: f16 scale, 16 bytes; low nibbles are elements 0..15.
[[gnu::always_inline]] inline void decode_q4_0(const uint8_t* row, int64_t k, int n, float out[kLanes]) {
  const uint8_t* block = row + size_t(k / 32) * 18;
  const float d = f16_to_f32(load_u16(block));
  const bool high = (k % 32) != 0;
  for (int i = 0; i < n; ++i) {
    const int nibble = high ? (block[2 + i] >> 4) : (block[2 + i] & 0x0f);
    out[i] = d * float(nibble - 8);
  }
}

// Block: f16 d, f16 m, 16 bytes; low nibbles are elements 0..15.
// w = d*q + m: the product is exact, the sum rounds once.
[[gnu::always_inline]] inline void decode_q4_1(const uint8_t* row, int64_t k, int n, float out[kLanes]) {
  const uint8_t* block = row + size_t(k / 32) * 20;
  const float d = f16_to_f32(load_u16(block)), m = f16_to_f32(load_u16(block + 2));
  const bool high = (k % 32) != 0;
  for (int i = 0; i < n; ++i) out[i] = d * float(high ? (block[4 + i] >> 4) : (block[4 + i] & 0x0f)) + m;
}

// Q5_0 block: f16 d, 4 bytes of fifth bits, 16 bytes of nibbles; Q5_1 block:
// f16 d, f16 m, then the same. One body for both, as the layouts differ only
// by m. Q5_0: w = d*(q-16), exact. Q5_1: w = d*q + m, the sum rounds once.
[[gnu::always_inline]] inline void decode_q5_0_or_q5_1(bool q51, const uint8_t* row, int64_t k, int n,
                                                        float out[kLanes]) {
  const uint8_t* block = row + size_t(k / 32) * (q51 ? 24 : 22);
  const float d = f16_to_f32(load_u16(block)), m = q51 ? f16_to_f32(load_u16(block + 2)) : 0.0f;
  const uint8_t* qh = block + (q51 ? 4 : 2);
  const uint8_t* qs = qh + 4;
  const int e0 = int(k % 32);
  for (int i = 0; i < n; ++i) {
    const int e = e0 + i;
    const int q = (e < 16 ? (qs[e] & 0x0f) : (qs[e - 16] >> 4)) | (q5_high_bit(qh, e) << 4);
    out[i] = q51 ? d * float(q) + m : d * float(q - 16);
  }
}

// 256 per block: 16 bytes of (scale | min << 4) for sub-blocks of 16, 64
// bytes of 2-bit values (128 elements share 32 bytes, 2 bits each at shifts
// 0, 2, 4, 6), f16 d, f16 dmin.
// w = (d*scale)*q - dmin*min: the products are exact, the difference rounds once.
[[gnu::always_inline]] inline void decode_q2_k(const uint8_t* row, int64_t k, int n, float out[kLanes]) {
  const uint8_t* block = row + size_t(k / 256) * 84;
  const float d = f16_to_f32(load_u16(block + 80)), dmin = f16_to_f32(load_u16(block + 82));
  const int e = int(k % 256), half = e / 128, j = (e % 128) / 32, l0 = e % 32;
  const int sc = block[half * 8 + j * 2 + (l0 >= 16)];
  const float scale = d * float(sc & 0x0f), offset = dmin * float(sc >> 4);
  const uint8_t* qs = block + 16 + half * 32;
  for (int i = 0; i < n; ++i) out[i] = scale * float((qs[l0 + i] >> (2 * j)) & 3) - offset;
}

// 256 per block: 32 bytes of high bits (bit half*4+j of byte l), 64 bytes of
// low 2-bit values (as Q2_K), 12 bytes of packed 6-bit scales, f16 d.
// q = low - (high bit ? 0 : 4), w = (d*(scale-32))*q: exact.
[[gnu::always_inline]] inline void decode_q3_k(const uint8_t* row, int64_t k, int n, float out[kLanes]) {
  const uint8_t* block = row + size_t(k / 256) * 110;
  const float d = f16_to_f32(load_u16(block + 108));
  const int e = int(k % 256), half = e / 128, j = (e % 128) / 32, l0 = e % 32;
  const float scale = d * float(q3k_scale(block + 96, half * 8 + j * 2 + (l0 >= 16)) - 32);
  const uint8_t* qs = block + 32 + half * 32;
  for (int i = 0; i < n; ++i) {
    const int l = l0 + i;
    const int q = ((qs[l] >> (2 * j)) & 3) - (((block[l] >> (half * 4 + j)) & 1) ? 0 : 4);
    out[i] = scale * float(q);
  }
}

// 256 per block: f16 d, f16 dmin, 12 bytes of packed 6-bit (scale, min) for
// 8 sub-blocks of 32, then 128 bytes of nibbles (64 elements share 32 bytes:
// low nibbles first). w = (d*scale)*q - dmin*min: the two products are exact,
// the difference rounds once.
[[gnu::always_inline]] inline void decode_q4_k(const uint8_t* row, int64_t k, int n, float out[kLanes]) {
  const uint8_t* block = row + size_t(k / 256) * 144;
  const float d = f16_to_f32(load_u16(block)), dmin = f16_to_f32(load_u16(block + 2));
  const uint8_t* scales = block + 4;
  const int e = int(k % 256), sub = e / 32;  // a 16-chunk never straddles a sub-block
  int sc, mn;
  q4k_scale_min(scales, sub, &sc, &mn);
  const float scale = d * float(sc), offset = dmin * float(mn);
  const uint8_t* q = block + 16 + (e / 64) * 32 + (e % 32);
  const bool high = (e % 64) >= 32;
  for (int i = 0; i < n; ++i) out[i] = scale * float(high ? (q[i] >> 4) : (q[i] & 0x0f)) - offset;
}

// 256 per block: f16 d, f16 dmin, 12 bytes of 6-bit (scale, min) as Q4_K, 32
// bytes of fifth bits (bit sub of byte e%32), 128 bytes of nibbles as Q4_K.
// w = (d*scale)*q - dmin*min: the products are exact, the difference rounds once.
[[gnu::always_inline]] inline void decode_q5_k(const uint8_t* row, int64_t k, int n, float out[kLanes]) {
  const uint8_t* block = row + size_t(k / 256) * 176;
  const float d = f16_to_f32(load_u16(block)), dmin = f16_to_f32(load_u16(block + 2));
  const int e = int(k % 256), sub = e / 32, l0 = e % 32;
  int sc, mn;
  q4k_scale_min(block + 4, sub, &sc, &mn);
  const float scale = d * float(sc), offset = dmin * float(mn);
  const uint8_t* qh = block + 16;
  const uint8_t* q = block + 48 + (e / 64) * 32;
  for (int i = 0; i < n; ++i) {
    const int l = l0 + i;
    const int nibble = (sub & 1) ? (q[l] >> 4) : (q[l] & 0x0f);
    out[i] = scale * float(nibble | (((qh[l] >> sub) & 1) << 4)) - offset;
  }
}

// 256 per block: 128 bytes of low nibbles, 64 bytes of high 2-bit pairs, 16
// int8 sub-block scales, f16 d. w = (d*scale)*(q-32): the first product is
// exact, the second rounds once.
[[gnu::always_inline]] inline void decode_q6_k(const uint8_t* row, int64_t k, int n, float out[kLanes]) {
  const uint8_t* block = row + size_t(k / 256) * 210;
  const float d = f16_to_f32(load_u16(block + 208));
  const int e = int(k % 256), half = e / 128, quarter = (e % 128) / 32, l0 = e % 32;
  const uint8_t* ql = block + half * 64 + (quarter & 1) * 32;
  const uint8_t* qh = block + 128 + half * 32;
  const int8_t* sc = reinterpret_cast<const int8_t*>(block + 192) + half * 8 + 2 * quarter;
  for (int i = 0; i < n; ++i) {
    const int l = l0 + i;
    const int low = quarter < 2 ? (ql[l] & 0x0f) : (ql[l] >> 4);
    const int q = (low | (((qh[l] >> (2 * quarter)) & 3) << 4)) - 32;
    out[i] = (d * float(sc[l / 16])) * float(q);
  }
}

// out[i] = element k+i of the row for i < n (n = min(16, cols-k)), 0 beyond.
// Forced inline as well, so no kernel pays a call per chunk for its split.
[[gnu::always_inline]] inline void decode_chunk(WeightType type, const uint8_t* row, int64_t k, int n, float out[kLanes]) {
  for (int i = n; i < kLanes; ++i) out[i] = 0.0f;
  switch (type) {
    case WeightType::F32: decode_f32(row, k, n, out); return;
    case WeightType::F16: decode_f16(row, k, n, out); return;
    case WeightType::BF16: decode_bf16(row, k, n, out); return;
    case WeightType::Q8_0: decode_q8_0(row, k, n, out); return;
    case WeightType::Q4_0: decode_q4_0(row, k, n, out); return;
    case WeightType::Q4_K: decode_q4_k(row, k, n, out); return;
    case WeightType::Q6_K: decode_q6_k(row, k, n, out); return;
    case WeightType::Q4_1: decode_q4_1(row, k, n, out); return;
    case WeightType::Q5_0:
    case WeightType::Q5_1: decode_q5_0_or_q5_1(type == WeightType::Q5_1, row, k, n, out); return;
    case WeightType::Q2_K: decode_q2_k(row, k, n, out); return;
    case WeightType::Q3_K: decode_q3_k(row, k, n, out); return;
    case WeightType::Q5_K: decode_q5_k(row, k, n, out); return;
  }
}

// The recipe's fixed combination of the 16 lane sums: a pairwise tree with
// strides 8, 4, 2, 1.
inline float reduce_lanes(const float acc[kLanes]) {
  float s8[8], s4[4], s2[2];
  for (int i = 0; i < 8; ++i) s8[i] = acc[i] + acc[i + 8];
  for (int i = 0; i < 4; ++i) s4[i] = s8[i] + s8[i + 4];
  for (int i = 0; i < 2; ++i) s2[i] = s4[i] + s4[i + 2];
  return s2[0] + s2[1];
}

}  // namespace kvg::detail
