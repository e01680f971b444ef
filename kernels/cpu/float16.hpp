// Exact conversions between fp32 and the 16-bit float formats stored in GGUF.
// Widening (f16/bf16 -> f32) is exact; narrowing rounds to nearest-even. Pure
// integer code, so every platform (and the CUDA side) gets the same bits.
#pragma once

#include <bit>
#include <cstdint>

#include "kernels/quant_bits.hpp"

namespace kvg {

inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

inline float f16_to_f32(uint16_t h) { return std::bit_cast<float>(f16_bits_to_f32_bits(h)); }

inline uint16_t f32_to_f16(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return uint16_t(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0));
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: overflow
  if (abs < 0x38800000u) {  // result is subnormal or zero in f16
    if (abs < 0x33000000u) return uint16_t(sign);  // below half the smallest subnormal
    const uint32_t exponent = abs >> 23;
    const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // 14..24
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return uint16_t(sign | half);
  }
  uint32_t half = ((abs >> 23) - 112) << 10 | ((abs >> 13) & 0x3ffu);
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // may carry into exponent: correct
  return uint16_t(sign | half);
}

inline uint16_t f32_to_bf16(float value) {
  uint32_t x = std::bit_cast<uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // quiet nan
  x += 0x7fffu + ((x >> 16) & 1u);
  return uint16_t(x >> 16);
}

}  // namespace kvg
