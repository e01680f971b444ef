// The integer parts of each block-quantized weight format as recipe
// q8-portable-v1 multiplies them with int8 activations (docs/recipe.md,
// "Recipe q8-portable-v1"): the small integer of element e, the integer scale
// and min of a sub-block, and the block's f16 scales widened to binary32.
// Plain scalar code: the definition the SIMD unpackers reproduce, and what
// they use for formats without a vector unpacker.
#pragma once

#include <cstdint>

#include "kernels/cpu/float16.hpp"
#include "kernels/cpu/weight_decode.hpp"
#include "kernels/quant_bits.hpp"

namespace kvg::detail {
// (Unnamed namespace: each translation unit, compiled for its own ISA, keeps
// its own copy; the linker must not merge them across ISAs.)
namespace {

// How a block's second term enters the accumulator (the spec's table):
// none; + float(S) * (m * dx) (Q4_1, Q5_1); - float(I2) * (dmin * dx) (Q2_K, Q4_K, Q5_K).
enum class Q8Second { None, PlusSum, MinusMins };

// Element e (0..31) of a 32-block's 16 bytes of nibbles: low nibbles are elements 0..15.
inline int nibble32(const uint8_t* qs, int e) { return e < 16 ? (qs[e] & 0x0f) : (qs[e - 16] >> 4); }

inline float f16_at(const uint8_t* p) { return f16_to_f32(load_u16(p)); }

template <WeightType kType>
struct Q8Weights;

// The block's f16 scales (d, and m or dmin where the format has one) at their
// byte offsets.
template <int kDOffset, int kD2Offset = -1>
struct Q8Scales {
  static constexpr int kDAt = kDOffset, kD2At = kD2Offset;
  static float d(const uint8_t* b) { return f16_at(b + kDAt); }
  static float d2(const uint8_t* b) { return f16_at(b + kD2At); }
};

// Q4_K and Q5_K: f16 d, f16 dmin, then 12 bytes of 6-bit (scale, min) for 8
// sub-blocks of 32 (q4k_scale_min).
struct Q8PackedScalesMins : Q8Scales<0, 2> {
  static constexpr int kBlock = 256, kScaleSub = 32, kMinSub = 32;
  static constexpr Q8Second kSecond = Q8Second::MinusMins;
  static int scale(const uint8_t* b, int j) { int s, m; q4k_scale_min(b + 4, j, &s, &m); return s; }
  static int min(const uint8_t* b, int j) { int s, m; q4k_scale_min(b + 4, j, &s, &m); return m; }
};

// Every specialisation: kBlock (elements), kBytes, kScaleSub (elements per
// integer-scaled sub-block, 0: no integer scales), kMinSub (elements per
// sub-block of the second term, 0: none), kSecond, value(block, e),
// scale(block, j), min(block, j), and from Q8Scales d(block), d2(block).

template <>
struct Q8Weights<WeightType::Q8_0> : Q8Scales<0> {
  static constexpr int kBlock = 32, kBytes = 34, kScaleSub = 0, kMinSub = 0;
  static constexpr Q8Second kSecond = Q8Second::None;
  static int value(const uint8_t* b, int e) { return int8_t(b[2 + e]); }
};

template <>
struct Q8Weights<WeightType::Q4_0> : Q8Scales<0> {
  static constexpr int kBlock = 32, kBytes = 18, kScaleSub = 0, kMinSub = 0;
  static constexpr Q8Second kSecond = Q8Second::None;
  static int value(const uint8_t* b, int e) { return nibble32(b + 2, e) - 8; }
};

template <>
struct Q8Weights<WeightType::Q4_1> : Q8Scales<0, 2> {
  static constexpr int kBlock = 32, kBytes = 20, kScaleSub = 0, kMinSub = 32;
  static constexpr Q8Second kSecond = Q8Second::PlusSum;
  static int value(const uint8_t* b, int e) { return nibble32(b + 4, e); }
  static int min(const uint8_t*, int) { return 1; }  // the second term is S itself
};

template <>
struct Q8Weights<WeightType::Q5_0> : Q8Scales<0> {
  static constexpr int kBlock = 32, kBytes = 22, kScaleSub = 0, kMinSub = 0;
  static constexpr Q8Second kSecond = Q8Second::None;
  static int value(const uint8_t* b, int e) { return (nibble32(b + 6, e) | (q5_high_bit(b + 2, e) << 4)) - 16; }
};

template <>
struct Q8Weights<WeightType::Q5_1> : Q8Scales<0, 2> {
  static constexpr int kBlock = 32, kBytes = 24, kScaleSub = 0, kMinSub = 32;
  static constexpr Q8Second kSecond = Q8Second::PlusSum;
  static int value(const uint8_t* b, int e) { return nibble32(b + 8, e) | (q5_high_bit(b + 4, e) << 4); }
  static int min(const uint8_t*, int) { return 1; }
};

template <>
struct Q8Weights<WeightType::Q2_K> : Q8Scales<80, 82> {
  // 16 bytes of (scale | min << 4) per sub-block of 16, 64 bytes of 2-bit
  // values (128 elements share 32 bytes at shifts 0, 2, 4, 6), f16 d, f16 dmin.
  static constexpr int kBlock = 256, kBytes = 84, kScaleSub = 16, kMinSub = 16;
  static constexpr Q8Second kSecond = Q8Second::MinusMins;
  static int value(const uint8_t* b, int e) { return (b[16 + (e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3; }
  static int scale(const uint8_t* b, int j) { return b[j] & 0x0f; }
  static int min(const uint8_t* b, int j) { return b[j] >> 4; }
};

template <>
struct Q8Weights<WeightType::Q3_K> : Q8Scales<108> {
  // 32 bytes of high bits, 64 bytes of low 2-bit values (as Q2_K), 12 bytes
  // of packed 6-bit scales, f16 d; q3 = low - (high bit ? 0 : 4) in [-4, 3].
  static constexpr int kBlock = 256, kBytes = 110, kScaleSub = 16, kMinSub = 0;
  static constexpr Q8Second kSecond = Q8Second::None;
  static int value(const uint8_t* b, int e) {
    const int half = e / 128, j = (e % 128) / 32, l = e % 32;
    return ((b[32 + half * 32 + l] >> (2 * j)) & 3) - (((b[l] >> (half * 4 + j)) & 1) ? 0 : 4);
  }
  static int scale(const uint8_t* b, int j) { return q3k_scale(b + 96, j) - 32; }
};

template <>
struct Q8Weights<WeightType::Q4_K> : Q8PackedScalesMins {
  // After the scales, 128 bytes of nibbles (64 elements share 32 bytes, low nibbles first).
  static constexpr int kBytes = 144;
  static int value(const uint8_t* b, int e) {
    const uint8_t byte = b[16 + (e / 64) * 32 + e % 32];
    return (e % 64) >= 32 ? byte >> 4 : byte & 0x0f;
  }
};

template <>
struct Q8Weights<WeightType::Q5_K> : Q8PackedScalesMins {
  // As Q4_K, with 32 bytes of fifth bits (bit j of byte e % 32) before the nibbles.
  static constexpr int kBytes = 176;
  static int value(const uint8_t* b, int e) {
    const uint8_t byte = b[48 + (e / 64) * 32 + e % 32];
    const int nibble = (e % 64) >= 32 ? byte >> 4 : byte & 0x0f;
    return nibble | (((b[16 + e % 32] >> (e / 32)) & 1) << 4);
  }
};

template <>
struct Q8Weights<WeightType::Q6_K> : Q8Scales<208> {
  // 128 bytes of low nibbles, 64 bytes of high 2-bit pairs, 16 int8 scales
  // (sub-blocks of 16), f16 d; q6 - 32 in [-32, 31].
  static constexpr int kBlock = 256, kBytes = 210, kScaleSub = 16, kMinSub = 0;
  static constexpr Q8Second kSecond = Q8Second::None;
  static int value(const uint8_t* b, int e) {
    const int half = e / 128, quarter = (e % 128) / 32, l = e % 32;
    const uint8_t low_byte = b[half * 64 + (quarter & 1) * 32 + l];
    const int low = quarter < 2 ? (low_byte & 0x0f) : (low_byte >> 4);
    return (low | (((b[128 + half * 32 + l] >> (2 * quarter)) & 3) << 4)) - 32;
  }
  static int scale(const uint8_t* b, int j) { return int8_t(b[192 + j]); }
};

// The formats recipe q8-portable-v1 quantizes against (the others have no Q8Weights).
template <WeightType kType>
constexpr bool kQ8Format = kType != WeightType::F32 && kType != WeightType::F16 && kType != WeightType::BF16;

}  // namespace
}  // namespace kvg::detail
