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

// out[i] = element k+i of the row for i < n (n = min(16, cols-k)), 0 beyond.
inline void decode_chunk(WeightType type, const uint8_t* row, int64_t k, int n, float out[kLanes]) {
  for (int i = n; i < kLanes; ++i) out[i] = 0.0f;
  switch (type) {
    case WeightType::F32:
      std::memcpy(out, row + size_t(k) * 4, size_t(n) * 4);
      return;
    case WeightType::F16:
      for (int i = 0; i < n; ++i) out[i] = f16_to_f32(load_u16(row + size_t(k + i) * 2));
      return;
    case WeightType::BF16:
      for (int i = 0; i < n; ++i) out[i] = bf16_to_f32(load_u16(row + size_t(k + i) * 2));
      return;
    case WeightType::Q8_0: {  // block: f16 scale, 32 x int8
      const uint8_t* block = row + size_t(k / 32) * 34;
      const float d = f16_to_f32(load_u16(block));
      const int8_t* q = reinterpret_cast<const int8_t*>(block + 2 + (k % 32));
      for (int i = 0; i < n; ++i) out[i] = d * float(q[i]);
      return;
    }
    case WeightType::Q4_0: {  // block: f16 scale, 16 bytes; low nibbles are elements 0..15
      const uint8_t* block = row + size_t(k / 32) * 18;
      const float d = f16_to_f32(load_u16(block));
      const bool high = (k % 32) != 0;
      for (int i = 0; i < n; ++i) {
        const int nibble = high ? (block[2 + i] >> 4) : (block[2 + i] & 0x0f);
        out[i] = d * float(nibble - 8);
      }
      return;
    }
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
