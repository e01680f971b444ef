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
constexpr int kDimsPerLane = kMaxHeadDim / 32;  // lane owns output features d = lane + 32 i
constexpr int kWarpsPerBlock = 4;

// (a < b) ? b : a is std::max(a, b) exactly, including which of +0 and -0
// survives and how NaN propagates; fmaxf would differ in both.
__device__ __forceinline__ float std_max(float a, float b) { return a < b ? b : a; }

// One warp per (token, query head), walking the blocks in increasing order
// with the state (running max, running sum, acc[d]) of attention_head().
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    attention_kernel(const float* __restrict__ q, int64_t q_stride, const float* __restrict__ k,
                     const float* __restrict__ v, int64_t kv_stride, AttentionShape shape, int64_t p0,
                     int64_t n_tokens, float* __restrict__ out, int64_t out_stride) {
  __shared__ float q_shared[kWarpsPerBlock][kMaxHeadDim];
  __shared__ float block_shared[kWarpsPerBlock][kBlock];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t task = int64_t(blockIdx.x) * kWarpsPerBlock + warp;
  if (task >= n_tokens * shape.n_head) return;  // whole warps only: __syncwarp below needs all 32 lanes
  const int64_t t = task / shape.n_head;
  const int h = int(task % shape.n_head);
  const int head_dim = shape.head_dim;
  const int64_t position = p0 + t;
  const int64_t kv_offset = int64_t(h / (shape.n_head / shape.n_head_kv)) * head_dim;
  float* qs = q_shared[warp];
  float* scores = block_shared[warp];

  for (int d = lane; d < head_dim; d += 32) qs[d] = q[t * q_stride + int64_t(h) * head_dim + d];
  __syncwarp();

  float acc[kDimsPerLane];
#pragma unroll
  for (int i = 0; i < kDimsPerLane; ++i) acc[i] = 0.0f;
  float running_max = -__int_as_float(0x7f800000);  // -inf
  float running_sum = 0.0f;

  for (int64_t start = 0; start <= position; start += kBlock) {
    const int n = int(position + 1 - start < kBlock ? position + 1 - start : kBlock);
    // 1. Scores, one position per lane, each a serial recipe dot product.
    float score = 0.0f;
    if (lane < n) {
      score = __fmul_rn(detail::dot_serial(qs, k + (start + lane) * kv_stride + kv_offset, head_dim), shape.scale);
      scores[lane] = score;
    }
    __syncwarp();
    // 2. The block max in position order (every lane the same, redundantly).
    float block_max = -__int_as_float(0x7f800000);
    for (int j = 0; j < n; ++j) block_max = std_max(block_max, scores[j]);
    const float new_max = std_max(running_max, block_max);
    const float alpha = detail::exp_f32(__fsub_rn(running_max, new_max));  // 0 on the first block
    __syncwarp();  // every lane has read the scores
    // 3. Weights p_j, then the block's sums in position order.
    if (lane < n) scores[lane] = detail::exp_f32(__fsub_rn(score, new_max));
    __syncwarp();
    float block_sum = 0.0f;
    for (int j = 0; j < n; ++j) block_sum = __fadd_rn(block_sum, scores[j]);
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < head_dim) {
        float block_acc = 0.0f;
        const float* vd = v + start * kv_stride + kv_offset + d;
        for (int j = 0; j < n; ++j) block_acc = __fadd_rn(block_acc, __fmul_rn(scores[j], vd[j * kv_stride]));
        // 4. Merge into the running state: product rounded, then added.
        acc[i] = __fadd_rn(__fmul_rn(acc[i], alpha), block_acc);
      }
    }
    running_sum = __fadd_rn(__fmul_rn(running_sum, alpha), block_sum);
    running_max = new_max;
    __syncwarp();  // the weights are read before the next block's scores overwrite them
  }
#pragma unroll
  for (int i = 0; i < kDimsPerLane; ++i) {
    const int d = lane + 32 * i;
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
  const int64_t tasks = n_tokens * shape.n_head;
  const int64_t blocks = (tasks + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > int64_t(0x7fffffff)) throw Error(ErrorCode::Internal, "cuda::attention: too many queries");
  attention_kernel<<<unsigned(blocks), kWarpsPerBlock * 32, 0, detail::native(stream)>>>(
      q, q_stride, k, v, kv_stride, shape, p0, n_tokens, out, out_stride);
  detail::check_launch("attention kernel launch");
}

}  // namespace kvg::cuda
