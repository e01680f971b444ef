#include "kernels/cuda/attention.hpp"

#include "common/error.hpp"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/recipe_math.cuh"

namespace kvg::cuda {

namespace {

// The recipe's block: 32 positions aligned to absolute positions, which is
// also a warp: lane j scores position start + j.
constexpr int kBlock = 32;
constexpr int kMaxHeadDim = 512;
constexpr int kDimsPerLane = kMaxHeadDim / 32;  // lane owns features d = lane + 32 i of its warp's block
// One CUDA block per (token, query head); its warps take consecutive key
// blocks, as many at a time (a "round") as the block has warps: up to
// kWarps, fewer when the longest context of the launch has fewer key blocks
// (a short context would leave warps idle). Each thread also owns features
// d = threadIdx.x + blockDim.x i of the running state.
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kDimsPerThread = kMaxHeadDim / 32;  // with a single warp
// K is staged kKeyChunk features at a time: 32 rows x 16 floats per warp,
// read by half-warps as 64 contiguous bytes per row. 16 is the recipe's
// lane count, so chunking keeps dot_serial's accumulation order. Rows are
// padded to 17 floats so that the 32 lanes reading one column of the chunk
// (one row each) hit 32 different banks.
constexpr int kKeyChunk = detail::kLanes;
constexpr int kKeyRow = kKeyChunk + 1;
static_assert(kMaxHeadDim % 32 == 0, "whole features per lane");

// (a < b) ? b : a is std::max(a, b) exactly, including which of +0 and -0
// survives and how NaN propagates; fmaxf would differ in both.
__device__ __forceinline__ float std_max(float a, float b) { return a < b ? b : a; }

// The recipe's score of key row `key` (device memory, head_dim floats)
// against the staged query, by lane `lane` of a warp whose 32 lanes stage
// the block's keys together: acc[i] collects features k = i (mod 16) in
// increasing k, exactly as dot_serial, then the same pairwise tree.
__device__ __forceinline__ float staged_score(const float* __restrict__ qs, const float* __restrict__ keys,
                                              int64_t kv_stride, int n, int head_dim, int lane,
                                              float (*stage)[kKeyRow]) {
  float acc[detail::kLanes];
#pragma unroll
  for (int i = 0; i < detail::kLanes; ++i) acc[i] = 0.0f;
  for (int k0 = 0; k0 < head_dim; k0 += kKeyChunk) {
    // 32 rows x 16 features: element e = lane + 32 r of the chunk is row
    // e / 16, feature e % 16, so each half-warp reads one row's 16 floats.
#pragma unroll
    for (int r = 0; r < kBlock * kKeyChunk / 32; ++r) {
      const int e = lane + 32 * r, row = e / kKeyChunk, col = e % kKeyChunk;
      if (row < n && k0 + col < head_dim) stage[row][col] = keys[int64_t(row) * kv_stride + k0 + col];
    }
    __syncwarp();
    if (lane < n) {
#pragma unroll
      for (int i = 0; i < detail::kLanes; ++i)
        if (k0 + i < head_dim) acc[i] = __fmaf_rn(qs[k0 + i], stage[lane][i], acc[i]);
    }
    __syncwarp();  // every lane has read the chunk before the next one overwrites it
  }
  return detail::reduce_lanes(acc);
}

// One CUDA block per (token, query head). Round after round, warp w takes
// key block b = round + w: its 32 scores in parallel (one per lane), then its
// block maximum; once every warp of the round has its maximum, each warp
// derives its block's running maximum m' from the maxima before it in block
// order, its weights p_j, sum lb and ab[d]. Then every thread merges the
// round's blocks into the running state, in block order, for the features
// it owns. Every value is the one attention_head() computes, in its order.
__global__ void __launch_bounds__(kThreads)
    attention_kernel(const float* __restrict__ q, int64_t q_stride, const float* __restrict__ k,
                     const float* __restrict__ v, int64_t kv_stride, AttentionShape shape, int64_t p0,
                     float* __restrict__ out, int64_t out_stride) {
  __shared__ float qs[kMaxHeadDim];
  __shared__ float key_stage[kWarps][kBlock][kKeyRow];
  __shared__ float weights[kWarps][kBlock];   // scores, then p_j
  __shared__ float block_max[kWarps];
  __shared__ float block_sum[kWarps];
  __shared__ float block_acc[kWarps][kMaxHeadDim];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = int(blockDim.x / 32);
  const int64_t t = blockIdx.x / shape.n_head;
  const int h = int(blockIdx.x % shape.n_head);
  const int head_dim = shape.head_dim;
  const int64_t position = p0 + t;
  const int64_t kv_offset = int64_t(h / (shape.n_head / shape.n_head_kv)) * head_dim;
  // The first key the query sees, and the block holding it: a window's edge
  // block is entered at that key, as on the CPU.
  const int64_t lo = shape.window > 0 && position - shape.window + 1 > 0 ? position - shape.window + 1 : 0;
  const int64_t first_block = lo / kBlock;
  const int64_t n_blocks = position / kBlock + 1 - first_block;
  const float minus_inf = -__int_as_float(0x7f800000);

  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) qs[d] = q[t * q_stride + int64_t(h) * head_dim + d];
  __syncthreads();

  float acc[kDimsPerThread];  // acc[i] is feature threadIdx.x + blockDim.x i
#pragma unroll
  for (int i = 0; i < kDimsPerThread; ++i) acc[i] = 0.0f;
  float running_max = minus_inf, running_sum = 0.0f;  // the same in every thread

  for (int64_t round = 0; round < n_blocks; round += warps) {
    const int in_round = int(n_blocks - round < warps ? n_blocks - round : warps);
    const int64_t block_start = (first_block + round + warp) * kBlock;
    const int64_t start = block_start > lo ? block_start : lo;
    const int64_t end = position + 1 < block_start + kBlock ? position + 1 : block_start + kBlock;
    const int n = warp < in_round ? int(end - start) : 0;
    // 1. Scores, one position per lane, and the block maximum in position order.
    float score = 0.0f;
    if (n > 0) {
      score = __fmul_rn(
          staged_score(qs, k + start * kv_stride + kv_offset, kv_stride, n, head_dim, lane, key_stage[warp]),
          shape.scale);
      if (shape.softcap > 0.0f) score = detail::softcap_f32(score, shape.softcap);
      if (lane < n) weights[warp][lane] = score;
      __syncwarp();
      if (lane == 0) {
        float m = minus_inf;
        for (int j = 0; j < n; ++j) m = std_max(m, weights[warp][j]);
        block_max[warp] = m;
      }
    }
    __syncthreads();
    // 2. This block's m': the running maximum through it, in block order.
    if (n > 0) {
      float new_max = running_max;
      for (int w = 0; w <= warp; ++w) new_max = std_max(new_max, block_max[w]);
      // 3. Weights, then lb and ab[d], each summed in position order.
      if (lane < n) weights[warp][lane] = detail::exp_f32(__fsub_rn(score, new_max));
      __syncwarp();
      if (lane == 0) {
        float lb = 0.0f;
        for (int j = 0; j < n; ++j) lb = __fadd_rn(lb, weights[warp][j]);
        block_sum[warp] = lb;
      }
      const float* vb = v + start * kv_stride + kv_offset;
#pragma unroll
      for (int i = 0; i < kDimsPerLane; ++i) {
        const int d = lane + 32 * i;  // a warp reads 32 consecutive floats of each row: coalesced
        if (d < head_dim) {
          float ab = 0.0f;
          for (int j = 0; j < n; ++j) ab = __fadd_rn(ab, __fmul_rn(weights[warp][j], vb[j * kv_stride + d]));
          block_acc[warp][d] = ab;
        }
      }
    }
    __syncthreads();
    // 4. Merge the round's blocks into the running state, in block order.
    for (int w = 0; w < in_round; ++w) {
      const float new_max = std_max(running_max, block_max[w]);
      const float alpha = detail::exp_f32(__fsub_rn(running_max, new_max));  // 0 on the first block
      running_sum = __fadd_rn(__fmul_rn(running_sum, alpha), block_sum[w]);
#pragma unroll
      for (int i = 0; i < kDimsPerThread; ++i) {
        const int d = int(threadIdx.x + blockDim.x * i);
        if (d < head_dim) acc[i] = __fadd_rn(__fmul_rn(acc[i], alpha), block_acc[w][d]);
      }
      running_max = new_max;
    }
    __syncthreads();  // the round's state is read before the next round overwrites it
  }
#pragma unroll
  for (int i = 0; i < kDimsPerThread; ++i) {
    const int d = int(threadIdx.x + blockDim.x * i);
    if (d < head_dim) out[t * out_stride + int64_t(h) * head_dim + d] = __fdiv_rn(acc[i], running_sum);
  }
}

}  // namespace

void attention(const float* q, int64_t q_stride, const float* k, const float* v, int64_t kv_stride,
               const AttentionShape& shape, int64_t p0, int64_t n_tokens, float* out, int64_t out_stride,
               const Stream& stream) {
  if (n_tokens <= 0) return;
  if (shape.head_dim <= 0 || shape.head_dim > kMaxHeadDim || shape.n_head_kv <= 0 ||
      shape.n_head % shape.n_head_kv != 0)
    throw Error(ErrorCode::Internal, "cuda::attention: unsupported shape (head_dim " + std::to_string(shape.head_dim) +
                                         ", heads " + std::to_string(shape.n_head) + "/" +
                                         std::to_string(shape.n_head_kv) + ")");
  const int64_t blocks = n_tokens * shape.n_head;
  if (blocks > int64_t(0x7fffffff)) throw Error(ErrorCode::Internal, "cuda::attention: too many queries");
  const int64_t key_blocks = (p0 + n_tokens - 1) / kBlock + 1;  // of the launch's last query
  const int warps = int(key_blocks < kWarps ? key_blocks : kWarps);
  attention_kernel<<<unsigned(blocks), warps * 32, 0, detail::native(stream)>>>(q, q_stride, k, v, kv_stride, shape,
                                                                              p0, out, out_stride);
  detail::check_launch("attention kernel launch");
}

}  // namespace kvg::cuda
