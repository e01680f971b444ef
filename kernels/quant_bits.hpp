// The integer halves of the recipe's weight decoding, shared verbatim by the
// CPU (kernels/cpu/) and the CUDA kernels (kernels/cuda/): how an f16 bit
// pattern widens to an f32 bit pattern, and how Q4_K packs its 6-bit
// sub-block scales and mins (Q3_K, Q5_0/Q5_1 bits likewise). Only the floating-point steps differ in
// spelling between the two sides (std:: vs __fmul_rn...), never these.
#pragma once

#include <cstdint>

#include "kernels/host_device.hpp"

namespace kvg {

// f16 bits -> the f32 bits of the same value (exact; subnormals renormalised,
// inf and NaN payloads kept).
KVG_HOST_DEVICE uint32_t f16_bits_to_f32_bits(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent != 0x1fu && exponent != 0) return sign | ((exponent + 112) << 23) | (mantissa << 13);  // normal
  if (exponent == 0x1fu) return sign | 0x7f800000u | (mantissa << 13);                                // inf / nan
  if (mantissa == 0) return sign;                                                                      // zero
  exponent = 113;  // subnormal: renormalise
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --exponent;
  }
  return sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
}

// Q4_K: the 6-bit scale and min of sub-block `sub` (0..7) from the block's
// 12 packed bytes.
KVG_HOST_DEVICE void q4k_scale_min(const uint8_t* scales, int sub, int* scale, int* min) {
  if (sub < 4) {
    *scale = scales[sub] & 63;
    *min = scales[sub + 4] & 63;
  } else {
    *scale = (scales[sub + 4] & 0x0f) | ((scales[sub - 4] >> 6) << 4);
    *min = (scales[sub + 4] >> 4) | ((scales[sub] >> 6) << 4);
  }
}

// Q3_K: the 6-bit scale of sub-block `sub` (0..15) from the block's 12
// packed bytes, as stored (the decoder subtracts 32): low 4 bits from bytes
// 0..7 (low nibbles for sub-blocks 0..7, high for 8..15), high 2 bits from
// bytes 8..11.
KVG_HOST_DEVICE int q3k_scale(const uint8_t* scales, int sub) {
  const int low = sub < 8 ? (scales[sub] & 0x0f) : (scales[sub - 8] >> 4);
  const int high = (scales[8 + (sub & 3)] >> (2 * (sub >> 2))) & 3;
  return low | (high << 4);
}

// Q5_0 / Q5_1: the fifth bit of element i (0..31), from the 4 bytes qh
// (a little-endian u32: bit i belongs to element i).
KVG_HOST_DEVICE int q5_high_bit(const uint8_t* qh, int i) { return (qh[i >> 3] >> (i & 7)) & 1; }

}  // namespace kvg
