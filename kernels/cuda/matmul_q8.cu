#include "kernels/cuda/matmul_q8.hpp"

#include <cstdint>
#include <string>

#include "common/error.hpp"
#include "kernels/cuda/block_shape.hpp"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/matmul_jobs.cuh"
#include "kernels/cuda/recipe_math.cuh"

namespace kvg::cuda {

namespace {

using detail::f16_to_f32;
using detail::kBlockBytes;
using detail::kScaleAt;
using detail::load_u16;
using detail::weight_q;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFullMask = 0xffffffffu;
// Activation sums are kept per 16 elements, the smallest sub-block of any
// format (Q2_K); larger sub-blocks add them up (integers: exact).
constexpr int kSumElements = 16;
// Tokens per warp in the prefill shape (decode: one).
constexpr int kTileTokens = 8;

// ---------------------------------------------------------------------------
// Activations quantized with block size B, in the scratch buffer.

struct Activations {
  int8_t* q = nullptr;     // [token][cols]
  float* dx = nullptr;     // [token][cols / B]
  int32_t* sums = nullptr; // [token][cols / 16]
};

size_t aligned(size_t n) { return (n + 255) & ~size_t(255); }

// Where the activations of block size `block` lie in the scratch, and the
// bytes up to their end (those of block size 32 first, then 256).
Activations activations_at(uint8_t* base, int block, int64_t cols, int64_t n_tokens, size_t* end) {
  size_t at = 0;
  Activations a;
  for (int b : {32, 256}) {
    const size_t q_bytes = aligned(size_t(n_tokens * cols));
    const size_t dx_bytes = aligned(size_t(n_tokens * (cols / b)) * sizeof(float));
    const size_t sum_bytes = aligned(size_t(n_tokens * (cols / kSumElements)) * sizeof(int32_t));
    if (b == block && base) {
      a.q = reinterpret_cast<int8_t*>(base + at);
      a.dx = reinterpret_cast<float*>(base + at + q_bytes);
      a.sums = reinterpret_cast<int32_t*>(base + at + q_bytes + dx_bytes);
    }
    at += q_bytes + dx_bytes + sum_bytes;
    if (b == block) break;
  }
  if (end) *end = at;
  return a;
}

// One warp per activation block: lane l holds elements [l * kPer, l * kPer
// + kPer). The maximum is order-independent, so the shuffle tree gives the
// exact largest |x_i|; the sums are integers.
template <int kBlock>
__global__ void __launch_bounds__(kThreads)
    quantize_kernel(const float* __restrict__ x, int64_t x_stride, int64_t n_tokens, int64_t cols, Activations a) {
  constexpr int kPer = kBlock / 32;
  constexpr int kLanesPerSum = kSumElements / kPer;
  const int lane = threadIdx.x % 32;
  const int64_t blocks_per_token = cols / kBlock;
  const int64_t index = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (index >= n_tokens * blocks_per_token) return;  // the whole warp: no collective is left waiting
  const int64_t t = index / blocks_per_token, b = index % blocks_per_token;
  const float* xb = x + t * x_stride + b * kBlock + lane * kPer;
  float v[kPer];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    v[i] = xb[i];
    const float magnitude = __uint_as_float(__float_as_uint(v[i]) & 0x7fffffffu);  // |x| exactly
    amax = magnitude > amax ? magnitude : amax;
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float other = __shfl_xor_sync(kFullMask, amax, offset);
    amax = other > amax ? other : amax;
  }
  int q[kPer];
  float dx = 0.0f;
  if (amax == 0.0f) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) q[i] = 0;
  } else {
    const float inv = __fdiv_rn(127.0f, amax);
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      // Clamped before rounding, as the CPU (kernels/cpu/activation_quant.cpp):
      // the same integer for a finite product, and one for the ±inf and NaN
      // that 127 / amax overflowing (amax below ~3.7e-37) leaves: NaN -> -127.
      float p = __fmul_rn(v[i], inv);
      p = p > -127.0f ? p : -127.0f;
      p = p < 127.0f ? p : 127.0f;
      q[i] = __float2int_rn(p);
    }
    dx = __fdiv_rn(amax, 127.0f);
  }
  int8_t* qb = a.q + t * cols + b * kBlock + lane * kPer;
  int sum = 0;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    qb[i] = int8_t(q[i]);
    sum += q[i];
  }
#pragma unroll
  for (int offset = kLanesPerSum / 2; offset > 0; offset >>= 1) sum += __shfl_xor_sync(kFullMask, sum, offset);
  if (lane % kLanesPerSum == 0) a.sums[t * (cols / kSumElements) + (b * kBlock + lane * kPer) / kSumElements] = sum;
  if (lane == 0) a.dx[t * blocks_per_token + b] = dx;
}

// ---------------------------------------------------------------------------
// The integer dot products and the float terms.

using Job = detail::MatmulJob;

// The launch's products (row tiles of kWarps rows) and their input,
// quantized for each activation block size.
struct Jobs : detail::MatmulJobs {
  Activations act32, act256;
};

// Formats whose block adds a second term fma(float(I2), s2, acc).
template <WeightType kType>
constexpr bool kTwoTerms = kType == WeightType::Q4_1 || kType == WeightType::Q5_1 || kType == WeightType::Q2_K ||
                           kType == WeightType::Q4_K || kType == WeightType::Q5_K;

// Floats per slot of a round (f1, s1, f2, s2), and per token row of the
// terms (padded so that the lanes reading token rows hit distinct banks).
constexpr int kTermFloats = 4;
constexpr int kTermStride = 32 * kTermFloats + 4;

// A round's weight blocks, staged in shared memory: the largest round is 32
// Q8_0 blocks of 34 bytes (the K formats' 4 blocks take at most 840).
constexpr int kStageBytes = 32 * 34;

// 16 activation bytes, loaded as one: a lane's 32 are 32-byte aligned (the
// scratch is 256-byte aligned and every offset a multiple of 32).
struct alignas(16) ActivationWords {
  int32_t w[4];
};

// The sub-block multipliers of the two 16-element halves [e0, e0 + 16) and
// [e0 + 16, e0 + 32) of a block: I1 = m1[0]*dot0 + m1[1]*dot1 and
// I2 = m2[0]*S0 + m2[1]*S1, as the recipe's table defines them.
template <WeightType kType>
__device__ __forceinline__ void sub_block_multipliers(const uint8_t* block, int e0, int m1[2], int m2[2]) {
  m1[0] = m1[1] = m2[0] = m2[1] = 1;  // the 32-element formats: one dot product, S = the block's sum
  if constexpr (kType == WeightType::Q2_K) {
    for (int h = 0; h < 2; ++h) {
      const int sc = detail::q2k_scale_byte(block, e0 / 16 + h);
      m1[h] = sc & 15;
      m2[h] = sc >> 4;
    }
  } else if constexpr (kType == WeightType::Q3_K) {
    for (int h = 0; h < 2; ++h) m1[h] = q3k_scale(block + 96, e0 / 16 + h) - 32;
  } else if constexpr (kType == WeightType::Q6_K) {
    for (int h = 0; h < 2; ++h) m1[h] = detail::q6k_scale(block, e0 / 16 + h);
  } else if constexpr (kType == WeightType::Q4_K || kType == WeightType::Q5_K) {
    int sc, mn;
    q4k_scale_min(block + 4, e0 / 32, &sc, &mn);
    m1[0] = m1[1] = sc;
    m2[0] = m2[1] = mn;
  }
}

// The second scale of a two-term block (Q4_1/Q5_1: m; the K formats: dmin)
// and the sign of its term (w = d*q + m, or (d*sc)*q - dmin*min).
template <WeightType kType>
__device__ __forceinline__ float second_scale(const uint8_t* block) {
  return f16_to_f32(load_u16(block + (kType == WeightType::Q2_K ? 82 : 2)));
}

// Row r for the tokens [t0, t0 + kTokens) by one warp. A weight block is
// split over kParts lanes, 32 elements each, so a round covers kSlots
// consecutive blocks. The warp first copies the round's bytes into `stage`
// in 16-bit words, lane after lane (coalesced). Before, each lane read its
// own block byte by byte from global memory, so every load instruction of
// the warp touched nine lines; the kernel ran at 0.6-0.9 TB/s on an H200
// (docs/gpu.md), and those loads are the likely bound (the staged version
// has not yet run on a GPU). Then every lane computes the integer sums of
// its part for each token, the parts of a block add theirs up (shuffles
// inside the block's lanes), and the block's first lane writes the float
// operands of its terms to `terms`. Then lane t applies token t's terms of
// the round, block after block: each output element is accumulated by one
// lane, in increasing block order.
template <WeightType kType, int kTokens>
__device__ __forceinline__ void row_tile(const Job& job, const Jobs& jobs, int64_t r, int64_t t0, int64_t n_tokens,
                                         float (*terms)[kTermStride], uint16_t* stage) {
  constexpr int kBlock = block_elements(kType);
  constexpr int kParts = kBlock / 32;
  constexpr int kSlots = 32 / kParts;
  const Activations a = kBlock == 32 ? jobs.act32 : jobs.act256;
  const int64_t cols = jobs.cols, blocks = cols / kBlock;
  const int lane = threadIdx.x % 32, slot = lane / kParts, part = lane % kParts, e0 = part * 32;
  const unsigned slot_mask = ((1u << kParts) - 1) << (slot * kParts);  // the lanes of this lane's block
  static_assert(kSlots * kBlockBytes<kType> <= kStageBytes, "a round must fit the stage");
  static_assert(kBlockBytes<kType> % 2 == 0, "blocks are copied in 16-bit words");
  const uint8_t* row = job.w + r * job.row_bytes;  // 2-byte aligned (load_u16)
  float acc = 0.0f;  // lane t < kTokens: the output of token t0 + t

  for (int64_t b0 = 0; b0 < blocks; b0 += kSlots) {
    const int used = int(blocks - b0 < kSlots ? blocks - b0 : kSlots);
    const uint16_t* from = reinterpret_cast<const uint16_t*>(row + b0 * kBlockBytes<kType>);
    for (int i = lane; i < used * kBlockBytes<kType> / 2; i += 32) stage[i] = from[i];
    // The round's blocks are staged. This barrier also keeps the round's
    // terms (written below) from overwriting the last round's before lanes
    // t < kTokens have applied them, and every stage read comes before the
    // terms barrier below, so the next round's copy cannot race them: a
    // third barrier at the end of the round would change nothing (the
    // emulator's removed-barrier test checks that each one here matters).
    __syncwarp();
    // Slots past the last block recompute the last one (staged bytes, the
    // same control flow for every lane) and are not applied.
    const int used_slot = slot < used ? slot : used - 1;
    const int64_t b = b0 + used_slot;
    const uint8_t* block = reinterpret_cast<const uint8_t*>(stage) + used_slot * kBlockBytes<kType>;
    int32_t w[8];  // this lane's 32 weights as int8, four to a word, in element order
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      uint32_t word = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) word |= uint32_t(uint8_t(weight_q<kType>(block, e0 + 4 * k + i))) << (8 * i);
      w[k] = int32_t(word);
    }
    int m1[2], m2[2];
    sub_block_multipliers<kType>(block, e0, m1, m2);
    const float d = f16_to_f32(load_u16(block + kScaleAt<kType>));
    float s2_scale = 0.0f;
    if constexpr (kTwoTerms<kType>) s2_scale = second_scale<kType>(block);

#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      const int64_t token = t0 + t < n_tokens ? t0 + t : n_tokens - 1;  // a missing token repeats the last
      const ActivationWords* xq = reinterpret_cast<const ActivationWords*>(a.q + token * cols + b * kBlock + e0);
      const ActivationWords x0 = xq[0], x1 = xq[1];
      int dot0 = 0, dot1 = 0;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        dot0 = __dp4a(w[k], x0.w[k], dot0);
        dot1 = __dp4a(w[k + 4], x1.w[k], dot1);
      }
      int i1 = m1[0] * dot0 + m1[1] * dot1, i2 = 0;
      if constexpr (kTwoTerms<kType>) {
        const int32_t* s = a.sums + token * (cols / kSumElements) + (b * kBlock + e0) / kSumElements;
        i2 = m2[0] * s[0] + m2[1] * s[1];
      }
#pragma unroll
      for (int offset = 1; offset < kParts; offset <<= 1) {
        i1 += __shfl_xor_sync(slot_mask, i1, offset);
        if constexpr (kTwoTerms<kType>) i2 += __shfl_xor_sync(slot_mask, i2, offset);
      }
      if (part == 0) {
        const float dx = a.dx[token * blocks + b];
        float* term = &terms[t][slot * kTermFloats];
        term[0] = __int2float_rn(i1);
        term[1] = __fmul_rn(d, dx);
        if constexpr (kTwoTerms<kType>) {
          // Q4_1/Q5_1 add m*S; the K formats subtract dmin*I2 (exact negation).
          const float f2 = __int2float_rn(i2);
          term[2] = kType == WeightType::Q4_1 || kType == WeightType::Q5_1 ? f2 : -f2;
          term[3] = __fmul_rn(s2_scale, dx);
        }
      }
    }
    __syncwarp();  // the round's terms are written
    if (lane < kTokens) {
      const float* mine = terms[lane];
      for (int s = 0; s < used; ++s) {
        acc = __fmaf_rn(mine[s * kTermFloats], mine[s * kTermFloats + 1], acc);
        if constexpr (kTwoTerms<kType>) acc = __fmaf_rn(mine[s * kTermFloats + 2], mine[s * kTermFloats + 3], acc);
      }
    }
  }
  if (lane < kTokens && t0 + lane < n_tokens) job.y[(t0 + lane) * job.y_stride + r] = acc;
}

// One block = kWarps rows of one job x one token tile (the token tile index
// runs fastest, so blocks that share weight rows run close together in time).
template <int kTokens>
__global__ void __launch_bounds__(kThreads) matmul_q8_kernel(Jobs jobs, int64_t n_tokens, int64_t token_tiles) {
  __shared__ float terms[kWarps][kTokens][kTermStride];
  __shared__ uint16_t stage[kWarps][kStageBytes / 2];
  const int64_t tile_index = blockIdx.x / token_tiles;
  const int64_t t0 = (blockIdx.x % token_tiles) * kTokens;
  const Job job = jobs.of_tile(tile_index);
  const int warp = threadIdx.x / 32;
  const int64_t r = (tile_index - job.first_tile) * kWarps + warp;
  if (r >= job.rows) return;  // the whole warp (no block barrier follows)
  with_weight_type(job.type, [&](auto type) {
    constexpr WeightType kType = decltype(type)::value;
    if constexpr (block_quantized(kType)) row_tile<kType, kTokens>(job, jobs, r, t0, n_tokens, terms[warp], stage[warp]);
  });
}

[[noreturn]] void invalid(const std::string& what) { throw Error(ErrorCode::Internal, "cuda::matmul_q8: " + what); }

}  // namespace

size_t matmul_q8_scratch_bytes(int64_t cols, int64_t n_tokens) {
  size_t end = 0;
  activations_at(nullptr, 256, cols, n_tokens, &end);
  return end;
}

void matmul_q8(std::span<const MatmulOutput> outputs, const float* x, int64_t x_stride, int64_t n_tokens,
               void* scratch, size_t scratch_bytes, const Stream& stream) {
  if (n_tokens <= 0 || outputs.empty()) return;
  if (outputs.size() > size_t(kMaxMatmulOutputs)) invalid("more than " + std::to_string(kMaxMatmulOutputs) + " outputs");
  const int64_t cols = outputs[0].w.cols;
  MatmulOutput f32_outputs[kMaxMatmulOutputs];
  size_t n_f32 = 0;
  Jobs jobs{};
  jobs.cols = cols;
  bool uses[2] = {false, false};  // activation blocks of 32, of 256
  for (const MatmulOutput& o : outputs) {
    if (o.w.cols != cols) invalid("outputs of one launch must share the input width");
    if (!block_quantized(o.w.type)) {
      f32_outputs[n_f32++] = o;  // f32-portable-v1 arithmetic for F32, F16, BF16
      continue;
    }
    if (o.w.cols % block_elements(o.w.type) != 0) invalid("a quantized row must hold whole blocks");
    if (o.w.rows <= 0) continue;
    uses[block_elements(o.w.type) == 256] = true;
    jobs.add(o, kWarps);
  }
  const int64_t tiles = jobs.tiles;
  if (tiles > 0 && scratch_bytes < matmul_q8_scratch_bytes(cols, n_tokens))  // before anything is queued
    invalid("scratch of " + std::to_string(scratch_bytes) + " bytes, " +
            std::to_string(matmul_q8_scratch_bytes(cols, n_tokens)) + " needed");
  if (tiles > 0 && reinterpret_cast<uintptr_t>(scratch) % 256 != 0)  // the kernel's 16-byte activation loads
    invalid("scratch must be 256-byte aligned (a device allocation is)");
  if (n_f32 > 0) matmul(std::span<const MatmulOutput>(f32_outputs, n_f32), x, x_stride, n_tokens, stream);
  if (tiles == 0 || cols <= 0) return;
  const cudaStream_t native = detail::native(stream);
  uint8_t* base = static_cast<uint8_t*>(scratch);
  jobs.act32 = activations_at(base, 32, cols, n_tokens, nullptr);
  jobs.act256 = activations_at(base, 256, cols, n_tokens, nullptr);
  if (uses[0]) {
    const int64_t warps = n_tokens * (cols / 32);
    quantize_kernel<32><<<unsigned((warps + kWarps - 1) / kWarps), kThreads, 0, native>>>(x, x_stride, n_tokens, cols,
                                                                                          jobs.act32);
    detail::check_launch("q8 activation quantization launch");
  }
  if (uses[1]) {
    const int64_t warps = n_tokens * (cols / 256);
    quantize_kernel<256><<<unsigned((warps + kWarps - 1) / kWarps), kThreads, 0, native>>>(x, x_stride, n_tokens, cols,
                                                                                           jobs.act256);
    detail::check_launch("q8 activation quantization launch");
  }
  const bool decode = n_tokens == 1;
  const int64_t token_tiles = decode ? 1 : (n_tokens + kTileTokens - 1) / kTileTokens;
  const int64_t blocks = tiles * token_tiles;
  if (blocks > int64_t(0x7fffffff)) invalid("product too large for one launch");
  if (decode)
    matmul_q8_kernel<1><<<unsigned(blocks), kThreads, 0, native>>>(jobs, n_tokens, token_tiles);
  else
    matmul_q8_kernel<kTileTokens><<<unsigned(blocks), kThreads, 0, native>>>(jobs, n_tokens, token_tiles);
  detail::check_launch("q8 matmul kernel launch");
}

}  // namespace kvg::cuda
