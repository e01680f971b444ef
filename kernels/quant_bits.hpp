// The integer halves of the recipe's weight decoding, shared verbatim by the
// CPU (kernels/cpu/) and the CUDA kernels (kernels/cuda/): how an f16 bit
// pattern widens to an f32 bit pattern, and how Q4_K packs its 6-bit
// sub-block scales and mins. Only the floating-point steps differ in
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

}  // namespace kvg
