// Device-side building blocks of the f32-portable-v1 recipe (docs/recipe.md):
// the weight decoders, exp_f32 and the 16-lane dot product, each a line-by-
// line port of the CPU definition in kernels/cpu/.
//
// Every floating-point operation is an explicit round-to-nearest intrinsic
// (__fmaf_rn, __fmul_rn, __fadd_rn, __fsub_rn, __fdiv_rn, __fsqrt_rn), so the
// compiler can neither contract a multiply and an add into an FMA nor
// substitute an approximate division, square root or reciprocal; the files
// are also compiled with -fmad=false -ftz=false -prec-div=true
// -prec-sqrt=true as a second line of defence.
#pragma once

// --use_fast_math turns on -ftz=true, -prec-div=false, -prec-sqrt=false and
// -fmad=true for the whole file and lets intrinsics such as __expf replace
// library calls: flushed subnormals alone change the weights' and
// activations' bits, so a build with it cannot compute the recipe. Refuse it
// rather than produce logits that silently differ from the CPU's. Toolkits
// that define __USE_FAST_MATH__ for the flag stop here; nvcc 13 does not
// define it, so kernels/CMakeLists.txt also refuses the flag at configure time.
#if defined(__USE_FAST_MATH__)
#error "kvg's CUDA kernels compute the f32-portable-v1 recipe bit for bit and must not be compiled with --use_fast_math"
#endif

#include <cstdint>

#include "kernels/cpu/weights.hpp"
#include "kernels/quant_bits.hpp"

namespace kvg::cuda::detail {

// The recipe's lane width: 16 partial sums per dot product.
constexpr int kLanes = 16;

__device__ __forceinline__ float f32_from_bits(uint32_t bits) { return __uint_as_float(bits); }

// f16 -> f32 exactly as kernels/cpu/float16.hpp: pure integer code, including
// subnormals and NaN payloads, so no hardware conversion is trusted.
__device__ __forceinline__ float f16_to_f32(uint16_t h) { return f32_from_bits(f16_bits_to_f32_bits(h)); }

__device__ __forceinline__ float bf16_to_f32(uint16_t h) { return f32_from_bits(uint32_t(h) << 16); }

// Rows start 2-byte aligned in every format (device buffers are 256-byte
// aligned; row and block sizes are even), so a u16 load is safe.
__device__ __forceinline__ uint16_t load_u16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }

// Bytes per block of each quantized format, and where its f16 scale d sits.
template <WeightType kType>
constexpr int kBlockBytes = kType == WeightType::Q8_0   ? 34
                            : kType == WeightType::Q4_0 ? 18
                            : kType == WeightType::Q4_1 ? 20
                            : kType == WeightType::Q5_0 ? 22
                            : kType == WeightType::Q5_1 ? 24
                            : kType == WeightType::Q2_K ? 84
                            : kType == WeightType::Q3_K ? 110
                            : kType == WeightType::Q4_K ? 144
                            : kType == WeightType::Q5_K ? 176
                            : kType == WeightType::Q6_K ? 210
                                                        : 0;
template <WeightType kType>
constexpr int kScaleAt = kType == WeightType::Q2_K ? 80 : kType == WeightType::Q3_K ? 108 : kType == WeightType::Q6_K ? 208 : 0;

// The integer part of element e of one block of a quantized format: the
// value its scale multiplies, in the range the q8-portable-v1 table names
// (Q8_0: the int8; Q4_0: nibble - 8; Q4_1, Q4_K: nibble; Q5_0: q5 - 16;
// Q5_1, Q5_K: q5; Q2_K: q2; Q3_K: q3 in [-4, 3]; Q6_K: q6 - 32). weight_at()
// multiplies it by the block's float scales; the q8 kernels multiply it with
// quantized activations in integers. One bit layout for both.
template <WeightType kType>
__device__ __forceinline__ int weight_q(const uint8_t* block, int e) {
  if constexpr (kType == WeightType::Q8_0) {  // f16 scale, 32 x int8
    return static_cast<int8_t>(block[2 + e]);
  } else if constexpr (kType == WeightType::Q4_0 || kType == WeightType::Q4_1) {
    // f16 d (Q4_1: and f16 m), 16 bytes: low nibbles are elements 0..15, high 16..31.
    const uint8_t byte = block[(kType == WeightType::Q4_1 ? 4 : 2) + (e & 15)];
    const int nibble = e < 16 ? (byte & 0x0f) : (byte >> 4);
    return kType == WeightType::Q4_0 ? nibble - 8 : nibble;
  } else if constexpr (kType == WeightType::Q5_0 || kType == WeightType::Q5_1) {
    // f16 d, (Q5_1: f16 m), 4 bytes of fifth bits, 16 bytes of nibbles.
    const uint8_t* qh = block + (kType == WeightType::Q5_1 ? 4 : 2);
    const uint8_t byte = qh[4 + (e & 15)];
    const int q = (e < 16 ? (byte & 0x0f) : (byte >> 4)) | (q5_high_bit(qh, e) << 4);
    return kType == WeightType::Q5_0 ? q - 16 : q;
  } else if constexpr (kType == WeightType::Q4_K) {
    // f16 d, f16 dmin, 12 bytes of scales, 128 bytes of nibbles (64
    // elements share 32 bytes, low nibbles first).
    const uint8_t byte = block[16 + (e / 64) * 32 + (e % 32)];
    return (e % 64) >= 32 ? (byte >> 4) : (byte & 0x0f);
  } else if constexpr (kType == WeightType::Q5_K) {
    // As Q4_K after 32 bytes of fifth bits (bit `sub` of byte e % 32).
    const int sub = e / 32, l = e % 32;
    const uint8_t byte = block[48 + (e / 64) * 32 + l];
    return ((sub & 1) ? (byte >> 4) : (byte & 0x0f)) | (((block[16 + l] >> sub) & 1) << 4);
  } else if constexpr (kType == WeightType::Q2_K) {
    // 16 bytes of (scale | min << 4), 64 bytes of 2-bit values, f16 d, f16 dmin.
    const int half = e / 128, j = (e % 128) / 32, l = e % 32;
    return (block[16 + half * 32 + l] >> (2 * j)) & 3;
  } else if constexpr (kType == WeightType::Q3_K) {
    // 32 bytes of high bits, 64 bytes of low 2-bit values, 12 bytes of scales, f16 d.
    const int half = e / 128, j = (e % 128) / 32, l = e % 32;
    return ((block[32 + half * 32 + l] >> (2 * j)) & 3) - (((block[l] >> (half * 4 + j)) & 1) ? 0 : 4);
  } else {
    static_assert(kType == WeightType::Q6_K, "weight_q: not a quantized format");
    // 128 bytes of low nibbles, 64 bytes of high 2-bit pairs, 16 int8
    // sub-block scales, f16 d.
    const int half = e / 128, quarter = (e % 128) / 32, l = e % 32;
    const uint8_t ql = block[half * 64 + (quarter & 1) * 32 + l];
    const uint8_t qh = block[128 + half * 32 + l];
    const int low = quarter < 2 ? (ql & 0x0f) : (ql >> 4);
    return (low | (((qh >> (2 * quarter)) & 3) << 4)) - 32;
  }
}

// The sub-block scales of the K formats, as stored: Q2_K's byte (scale |
// min << 4) and Q3_K's 6-bit scale of 16-element sub-block j, Q6_K's int8
// scale of sub-block j; Q4_K / Q5_K's (scale, min) of 32-element sub-block j.
__device__ __forceinline__ int q2k_scale_byte(const uint8_t* block, int j) { return block[j]; }
__device__ __forceinline__ int q6k_scale(const uint8_t* block, int j) { return static_cast<int8_t>(block[192 + j]); }

// Element k of a weight row as fp32: the value decode_chunk() produces
// (kernels/cpu/weight_decode.hpp), with the same roundings in the same order
// (exact for every format but Q6_K, see docs/recipe.md).
template <WeightType kType>
__device__ __forceinline__ float weight_at(const uint8_t* row, int64_t k) {
  if constexpr (kType == WeightType::F32) {
    return reinterpret_cast<const float*>(row)[k];
  } else if constexpr (kType == WeightType::F16) {
    return f16_to_f32(load_u16(row + k * 2));
  } else if constexpr (kType == WeightType::BF16) {
    return bf16_to_f32(load_u16(row + k * 2));
  } else {
    constexpr bool k_format = kType == WeightType::Q2_K || kType == WeightType::Q3_K || kType == WeightType::Q4_K ||
                              kType == WeightType::Q5_K || kType == WeightType::Q6_K;
    constexpr int elements = k_format ? 256 : 32;
    const uint8_t* block = row + (k / elements) * kBlockBytes<kType>;
    const int e = int(k % elements);
    const float q = float(weight_q<kType>(block, e));
    const float d = f16_to_f32(load_u16(block + kScaleAt<kType>));
    if constexpr (kType == WeightType::Q8_0 || kType == WeightType::Q4_0 || kType == WeightType::Q5_0) {
      return __fmul_rn(d, q);
    } else if constexpr (kType == WeightType::Q4_1 || kType == WeightType::Q5_1) {  // w = d*q + m
      return __fadd_rn(__fmul_rn(d, q), f16_to_f32(load_u16(block + 2)));
    } else if constexpr (kType == WeightType::Q4_K || kType == WeightType::Q5_K) {
      // w = (d*scale)*q - dmin*min, rounded as the CPU.
      int sc, mn;
      q4k_scale_min(block + 4, e / 32, &sc, &mn);
      const float dmin = f16_to_f32(load_u16(block + 2));
      return __fsub_rn(__fmul_rn(__fmul_rn(d, float(sc)), q), __fmul_rn(dmin, float(mn)));
    } else if constexpr (kType == WeightType::Q2_K) {
      const int sc = q2k_scale_byte(block, e / 16);
      const float dmin = f16_to_f32(load_u16(block + 82));
      return __fsub_rn(__fmul_rn(__fmul_rn(d, float(sc & 0x0f)), q), __fmul_rn(dmin, float(sc >> 4)));
    } else if constexpr (kType == WeightType::Q3_K) {
      return __fmul_rn(__fmul_rn(d, float(q3k_scale(block + 96, e / 16) - 32)), q);
    } else {  // Q6_K: w = (d*scale)*(q-32)
      return __fmul_rn(__fmul_rn(d, float(q6k_scale(block, e / 16))), q);
    }
  }
}

// exp_f32 of kernels/cpu/portable_math.hpp, operation for operation.
__device__ __forceinline__ float exp_f32(float x) {
  if (x != x) return x;
  if (x > 88.0f) return f32_from_bits(0x7f800000u);  // +inf
  if (x < -86.0f) return 0.0f;
  const float shifter = 12582912.0f;  // 1.5 * 2^23
  const float n = __fsub_rn(__fadd_rn(__fmul_rn(x, 1.44269504088896341f), shifter), shifter);
  float r = __fmaf_rn(n, -0.693359375f, x);
  r = __fmaf_rn(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = __fmaf_rn(p, r, 1.3981999507e-3f);
  p = __fmaf_rn(p, r, 8.3334519073e-3f);
  p = __fmaf_rn(p, r, 4.1665795894e-2f);
  p = __fmaf_rn(p, r, 1.6666665459e-1f);
  p = __fmaf_rn(p, r, 5.0000001201e-1f);
  const float r2 = __fmul_rn(r, r);
  p = __fmaf_rn(p, r2, r);
  p = __fadd_rn(p, 1.0f);
  const int32_t e = int32_t(n) + 127;  // n is an integer in [-125, 127]: truncation is exact
  return __fmul_rn(p, f32_from_bits(uint32_t(e) << 23));
}

// SiLU as the recipe defines it: x / (1 + exp(-x)).
__device__ __forceinline__ float silu_f32(float x) { return __fdiv_rn(x, __fadd_rn(1.0f, exp_f32(-x))); }

// tanh_f32, gelu_tanh_f32 and softcap_f32 of kernels/cpu/portable_math.hpp,
// operation for operation.
__device__ __forceinline__ float tanh_f32(float x) {
  if (x != x || x == 0.0f) return x;  // NaN, and zeros keep their sign
  const float a = x < 0.0f ? -x : x;  // |x| (exact)
  if (a < 0.625f) {
    const float z = __fmul_rn(x, x);
    float p = -5.70498872745e-3f;
    p = __fmaf_rn(p, z, 2.06390887954e-2f);
    p = __fmaf_rn(p, z, -5.37397155531e-2f);
    p = __fmaf_rn(p, z, 1.33314422036e-1f);
    p = __fmaf_rn(p, z, -3.33332819422e-1f);
    return __fmaf_rn(__fmul_rn(p, z), x, x);
  }
  const float t = __fsub_rn(1.0f, __fdiv_rn(2.0f, __fadd_rn(exp_f32(__fmul_rn(2.0f, a)), 1.0f)));
  return x < 0.0f ? -t : t;
}

__device__ __forceinline__ float gelu_tanh_f32(float x) {
  const float u = __fmul_rn(__fmul_rn(0.7978845608f, x), __fadd_rn(1.0f, __fmul_rn(0.044715f, __fmul_rn(x, x))));
  return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, tanh_f32(u)));
}

__device__ __forceinline__ float softcap_f32(float x, float cap) {
  return __fmul_rn(tanh_f32(__fmul_rn(x, __fdiv_rn(1.0f, cap))), cap);
}

// The recipe's fixed pairwise tree over 16 lane sums held by one thread
// (reduce_lanes in kernels/cpu/weight_decode.hpp).
__device__ __forceinline__ float reduce_lanes(const float acc[kLanes]) {
  float s8[8], s4[4], s2[2];
#pragma unroll
  for (int i = 0; i < 8; ++i) s8[i] = __fadd_rn(acc[i], acc[i + 8]);
#pragma unroll
  for (int i = 0; i < 4; ++i) s4[i] = __fadd_rn(s8[i], s8[i + 4]);
#pragma unroll
  for (int i = 0; i < 2; ++i) s2[i] = __fadd_rn(s4[i], s4[i + 2]);
  return __fadd_rn(s2[0], s2[1]);
}

// The same tree when lane i of a 16-thread group (a half-warp, aligned to 16
// within its warp) holds acc[i]. __shfl_down_sync with width 16 gives lane i
// the value of lane i + offset in its own half, so after offsets 8, 4, 2, 1
// lane 0 holds ((acc[0]+acc[8]) + (acc[4]+acc[12])) + ... exactly as
// reduce_lanes: each step adds the partner (i + offset) to the left operand
// i, as s8[i] = acc[i] + acc[i+8] does. Other lanes hold garbage. Every
// thread of the warp must call it (full mask).
__device__ __forceinline__ float reduce_half_warp(float v) {
  v = __fadd_rn(v, __shfl_down_sync(0xffffffffu, v, 8, 16));
  v = __fadd_rn(v, __shfl_down_sync(0xffffffffu, v, 4, 16));
  v = __fadd_rn(v, __shfl_down_sync(0xffffffffu, v, 2, 16));
  v = __fadd_rn(v, __shfl_down_sync(0xffffffffu, v, 1, 16));
  return v;
}

// Lane `lane`'s partial of a 16-lane row reduction: step(acc, x[k]) for k =
// lane, lane + 16, ... in that order (the recipe's chain). The loads go out
// kBatch at a time before the batch's steps: a step waits on its own load,
// so a plain loop waits one memory latency per element (a 2,048-wide
// RMSNorm took 14 us on an H200 that way); batched, the latencies can
// overlap (not yet timed on a GPU), and the chain's order, hence every bit,
// is unchanged.
template <class Step>
__device__ __forceinline__ float lane_chain(const float* x, int64_t n, int lane, Step step) {
  constexpr int kBatch = 16;
  float acc = 0.0f;
  int64_t k = lane;
  for (; k + (kBatch - 1) * kLanes < n; k += kBatch * kLanes) {
    float v[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) v[i] = x[k + i * kLanes];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) acc = step(acc, v[i]);
  }
  for (; k < n; k += kLanes) acc = step(acc, x[k]);
  return acc;
}

// dot(a, b) over n elements in the recipe's order, by one thread.
__device__ __forceinline__ float dot_serial(const float* a, const float* b, int n) {
  float acc[kLanes];
#pragma unroll
  for (int i = 0; i < kLanes; ++i) acc[i] = 0.0f;
  for (int k0 = 0; k0 < n; k0 += kLanes) {
#pragma unroll
    for (int i = 0; i < kLanes; ++i)
      if (k0 + i < n) acc[i] = __fmaf_rn(a[k0 + i], b[k0 + i], acc[i]);
  }
  return reduce_lanes(acc);
}

}  // namespace kvg::cuda::detail
