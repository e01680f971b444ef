// The compact KV storages' rounding, as integer operations on binary32 bit
// patterns, shared verbatim by the CPU (kernels/cpu/kv_rounding.cpp), the
// CUDA kernel (kernels/cuda/kv_rounding.cu) and the artifact codec
// (storage/kv_codec.cpp), so all three agree bit for bit by construction and
// nothing depends on the floating-point environment (flush-to-zero, FMA).
//
// A KV cache stored compactly stays exact when every K and V row is rounded
// as it is written and attention reads the rounded value (docs/design.md): the
// cache then holds exactly what the compact bytes represent. Both roundings
// are idempotent, so encoding a rounded row is lossless and decoding gives
// back the identical floats. docs/artifact-format.md (section 3) is the
// normative definition; the finite-only scope is the recipe's.
//
//  - bf16: round to nearest, ties to even, to the 16 high bits; a NaN becomes
//    the one canonical quiet NaN 0x7fc00000.
//  - i8: one row (one KV head's head_dim values of one token) shares a
//    power-of-two scale 2^e, e the smallest integer >= kI8MinExponent with
//    amax <= 127 * 2^e; each value becomes q * 2^e, q = rne(x / 2^e). The
//    scaling is exact (a power of two), so only the rounding to an integer
//    loses anything, and the rounded floats give back the same (e, q).
//    A row holding a NaN or an infinity becomes all canonical NaN.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/host_device.hpp"

namespace kvg::kv_rounding {

inline constexpr uint32_t kCanonicalNan = 0x7fc00000u;
// The i8 exponent is stored as one signed byte; -128 is its least value.
// (Any bound >= -149 keeps q * 2^e exact: only rows whose largest magnitude
// is below 127 * 2^-128, about 3.7e-37, lose relative precision to it.)
inline constexpr int kI8MinExponent = -128;
// The largest exponent of a finite canonical row: 64 * 2^122 = 2^128 overflows.
inline constexpr int kI8MaxExponent = 121;
inline constexpr int kI8MinLeading = 64;  // a canonical row's largest |q| unless e = kI8MinExponent

KVG_HOST_DEVICE uint32_t bits_of(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

KVG_HOST_DEVICE float float_of(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

KVG_HOST_DEVICE bool is_finite_bits(uint32_t u) { return (u & 0x7f800000u) != 0x7f800000u; }
KVG_HOST_DEVICE bool is_nan_bits(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }

// binary32 -> the binary32 bits of its bfloat16 rounding (low 16 bits zero).
KVG_HOST_DEVICE uint32_t bf16_round_bits(uint32_t u) {
  if (is_nan_bits(u)) return kCanonicalNan;
  // Adding 0x7fff plus the kept lsb carries into the kept bits exactly when
  // the dropped half is above one half, or one half with an odd kept part;
  // a carry out of the mantissa steps the exponent (up to infinity) as it should.
  return (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
}

// |x| = m * 2^k with m the integer significand (implicit bit included).
struct Significand {
  uint32_t m;
  int k;
};

KVG_HOST_DEVICE Significand significand_of(uint32_t u) {
  const uint32_t field = (u >> 23) & 0xffu, mantissa = u & 0x7fffffu;
  if (field == 0) return {mantissa, -149};  // zero or subnormal
  return {mantissa | 0x800000u, int(field) - 150};
}

KVG_HOST_DEVICE int bit_length(uint32_t m) {
#ifdef __CUDA_ARCH__
  return 32 - __clz(m);
#else
  return m == 0 ? 0 : 32 - __builtin_clz(m);
#endif
}

// The row's exponent from the bits of its largest magnitude (finite):
// the smallest e >= kI8MinExponent with amax <= 127 * 2^e.
KVG_HOST_DEVICE int i8_exponent(uint32_t amax_bits) {
  const Significand s = significand_of(amax_bits & 0x7fffffffu);
  if (s.m == 0) return kI8MinExponent;
  const int length = bit_length(s.m);
  // At e0 = k + length - 7, amax / 2^e0 = m * 2^(7 - length) lies in [64, 128),
  // so e0 is right unless that exceeds 127; then e0 + 1 (amax / 2^e in (63.5, 64)).
  int e = s.k + length - 7;
  if ((uint64_t(s.m) << 7) > (uint64_t(127) << length)) ++e;
  return e < kI8MinExponent ? kI8MinExponent : e;
}

// q = rne(x / 2^e), exactly (|q| <= 127 when e is the row's i8_exponent).
KVG_HOST_DEVICE int i8_quantize(uint32_t u, int e) {
  const Significand s = significand_of(u & 0x7fffffffu);
  const int shift = e - s.k;  // |x| / 2^e = m / 2^shift
  uint32_t q;
  if (shift <= 0) {
    q = s.m << (-shift);  // unreachable for the row's own exponent (there shift >= 17)
  } else if (shift > 25) {
    q = 0;  // m < 2^24, so m / 2^shift < 1/2
  } else {
    q = s.m >> shift;
    const uint32_t rest = s.m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (q & 1u))) ++q;
  }
  return (u >> 31) ? -int(q) : int(q);
}

// The binary32 bits of q * 2^e (exact; +0 for q = 0; infinity past the range).
KVG_HOST_DEVICE uint32_t i8_value_bits(int q, int e) {
  if (q == 0) return 0;
  const uint32_t sign = q < 0 ? 0x80000000u : 0u;
  const uint32_t m = uint32_t(q < 0 ? -q : q);
  const int length = bit_length(m);
  const int top = e + length - 1;  // the value is in [2^top, 2^(top+1))
  if (top > 127) return sign | 0x7f800000u;
  if (top < -126) return sign | (m << (e + 149));  // subnormal: value = bits * 2^-149, e >= -149
  return sign | (uint32_t(top + 127) << 23) | ((m << (24 - length)) & 0x7fffffu);
}

// Rounds n floats to bf16 in place.
KVG_HOST_DEVICE void round_bf16(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = float_of(bf16_round_bits(bits_of(x[i])));
}

// Largest magnitude's bits of a row, or a NaN/infinity's bits if it has one
// (the comparison of magnitudes as integers orders finite values and puts
// infinities and NaNs above them).
KVG_HOST_DEVICE uint32_t row_amax_bits(const float* x, int n) {
  uint32_t amax = 0;
  for (int i = 0; i < n; ++i) {
    const uint32_t a = bits_of(x[i]) & 0x7fffffffu;
    if (a > amax) amax = a;
  }
  return amax;
}

// Rounds one row of n floats to the i8 storage in place.
KVG_HOST_DEVICE void round_i8_row(float* x, int n) {
  const uint32_t amax = row_amax_bits(x, n);
  if (!is_finite_bits(amax)) {
    for (int i = 0; i < n; ++i) x[i] = float_of(kCanonicalNan);
    return;
  }
  const int e = i8_exponent(amax);
  for (int i = 0; i < n; ++i) x[i] = float_of(i8_value_bits(i8_quantize(bits_of(x[i]), e), e));
}

}  // namespace kvg::kv_rounding
