#include "kernels/cuda/matmul.hpp"

#include <string>

#include "common/error.hpp"
#include "kernels/cuda/block_shape.hpp"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/matmul_jobs.cuh"
#include "kernels/cuda/recipe_math.cuh"

namespace kvg::cuda {

namespace {

using detail::kLanes;
using detail::weight_at;

constexpr int kThreads = 128;
constexpr int kGroups = kThreads / kLanes;  // half-warps per block, each one dot product at a time

// Decode shape (a few tokens): one token and one row per group, activations
// read straight from global memory (they are tiny and stay in L1). Bound by
// weight traffic, so it maximises the number of rows in flight.
constexpr int64_t kDecodeMaxTokens = 4;
// Prefill shape: each group holds kTileTokens x kRowsPerGroup dot products,
// so one decoded weight feeds kTileTokens FMAs and one staged activation
// feeds kRowsPerGroup; activations are staged kChunk elements at a time.
constexpr int kTileTokens = 16, kRowsPerGroup = 4, kChunk = 256;
static_assert(kChunk % 16 == 0, "a chunk must hold whole lane rounds");

using Job = detail::MatmulJob;
using Jobs = detail::MatmulJobs;

// The dot products of kTokens tokens from t0 and kRows rows per group of one
// row tile. Lane `lane` of a group accumulates exactly the elements
// k ≡ lane (mod 16) in increasing k, whatever the tiling: in the prefill
// shape the chunks are visited in order and kChunk is a multiple of 16.
template <WeightType kType, int kTokens, int kRows>
__device__ __forceinline__ void tile(const Job& job, int64_t cols, int64_t row_tile, int64_t t0, int64_t n_tokens,
                                     const float* __restrict__ x, int64_t x_stride, float (*xs)[kChunk]) {
  const int lane = threadIdx.x % kLanes;
  const int group = threadIdx.x / kLanes;
  const int64_t r0 = (row_tile * kGroups + group) * kRows;
  // Rows past the end read the last row (valid memory) and store nothing, so
  // every thread reaches the shuffles and barriers below.
  const uint8_t* rows[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) rows[r] = job.w + (r0 + r < job.rows ? r0 + r : job.rows - 1) * job.row_bytes;

  float acc[kTokens][kRows];
#pragma unroll
  for (int t = 0; t < kTokens; ++t)
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[t][r] = 0.0f;

  if constexpr (kTokens == 1) {
    const float* xt = x + t0 * x_stride;
#pragma unroll 4
    for (int64_t k = lane; k < cols; k += kLanes) {
      const float xv = xt[k];
#pragma unroll
      for (int r = 0; r < kRows; ++r) acc[0][r] = __fmaf_rn(xv, weight_at<kType>(rows[r], k), acc[0][r]);
    }
  } else {
    for (int64_t c0 = 0; c0 < cols; c0 += kChunk) {
      const int n = int(cols - c0 < kChunk ? cols - c0 : kChunk);
      __syncthreads();  // everyone is done reading the previous chunk
      for (int i = threadIdx.x; i < kTokens * kChunk; i += kThreads) {
        const int t = i / kChunk, k = i % kChunk;
        xs[t][k] = (t0 + t < n_tokens && k < n) ? x[(t0 + t) * x_stride + c0 + k] : 0.0f;
      }
      __syncthreads();
      for (int k = lane; k < n; k += kLanes) {
        float wv[kRows];
#pragma unroll
        for (int r = 0; r < kRows; ++r) wv[r] = weight_at<kType>(rows[r], c0 + k);
#pragma unroll
        for (int t = 0; t < kTokens; ++t) {
          const float xv = xs[t][k];  // the same address across a warp's two groups: a broadcast
#pragma unroll
          for (int r = 0; r < kRows; ++r) acc[t][r] = __fmaf_rn(xv, wv[r], acc[t][r]);
        }
      }
    }
  }

#pragma unroll
  for (int t = 0; t < kTokens; ++t)
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float v = detail::reduce_half_warp(acc[t][r]);
      if (lane == 0 && r0 + r < job.rows && t0 + t < n_tokens) job.y[(t0 + t) * job.y_stride + r0 + r] = v;
    }
}

// One block = one row tile of one job x one token tile; the token tile index
// runs fastest, so blocks that share weight rows run close together in time
// and find the rows in L2.
template <int kTokens, int kRows>
__global__ void __launch_bounds__(kThreads)
    matmul_kernel(Jobs jobs, const float* __restrict__ x, int64_t x_stride, int64_t n_tokens, int64_t token_tiles) {
  __shared__ float xs[kTokens > 1 ? kTokens : 1][kChunk];
  const int64_t block = blockIdx.x;
  const int64_t tile_index = block / token_tiles;
  const int64_t t0 = (block % token_tiles) * kTokens;
  const Job job = jobs.of_tile(tile_index);
  const int64_t row_tile = tile_index - job.first_tile;
  // The format is uniform per block: no divergence.
  with_weight_type(job.type, [&](auto type) {
    tile<decltype(type)::value, kTokens, kRows>(job, jobs.cols, row_tile, t0, n_tokens, x, x_stride, xs);
  });
}

[[noreturn]] void invalid(const std::string& what) { throw Error(ErrorCode::Internal, "cuda::matmul: " + what); }

}  // namespace

void matmul(std::span<const MatmulOutput> outputs, const float* x, int64_t x_stride, int64_t n_tokens,
            const Stream& stream) {
  if (n_tokens <= 0 || outputs.empty()) return;
  if (outputs.size() > size_t(kMaxMatmulOutputs)) invalid("more than " + std::to_string(kMaxMatmulOutputs) + " outputs");
  const bool decode = n_tokens <= kDecodeMaxTokens;
  const int64_t rows_per_tile = int64_t(kGroups) * (decode ? 1 : kRowsPerGroup);
  Jobs jobs{};
  jobs.cols = outputs[0].w.cols;
  for (const MatmulOutput& o : outputs) {
    if (o.w.cols != jobs.cols) invalid("outputs of one launch must share the input width");
    if (o.w.cols % block_elements(o.w.type) != 0) invalid("a quantized row must hold whole blocks");
    if (o.w.rows > 0) jobs.add(o, rows_per_tile);
  }
  const int64_t tiles = jobs.tiles;
  if (tiles == 0 || jobs.cols <= 0) return;
  const int64_t token_tiles = decode ? n_tokens : (n_tokens + kTileTokens - 1) / kTileTokens;
  const int64_t blocks = tiles * token_tiles;
  if (blocks > int64_t(0x7fffffff)) invalid("product too large for one launch");
  if (decode)
    matmul_kernel<1, 1><<<unsigned(blocks), kThreads, 0, detail::native(stream)>>>(jobs, x, x_stride, n_tokens, token_tiles);
  else
    matmul_kernel<kTileTokens, kRowsPerGroup>
        <<<unsigned(blocks), kThreads, 0, detail::native(stream)>>>(jobs, x, x_stride, n_tokens, token_tiles);
  detail::check_launch("matmul kernel launch");
}

}  // namespace kvg::cuda
