#include "kernels/cuda/kv_rounding.hpp"

#include "kernels/cuda/launch.cuh"
#include "kernels/kv_rounding.hpp"

namespace kvg::cuda {

namespace {

constexpr int kThreads = 128;

// One thread per row (one head of one token): a row shares one scale, and
// head_dim is small enough that a serial pass over it costs nothing next to
// the matmul that produced it.
template <KvRowRounding kRounding>
__global__ void round_rows_kernel(float* x, int64_t n_tokens, int64_t row_stride, int n_heads, int head_dim) {
  const int64_t rows = n_tokens * n_heads;
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += int64_t(gridDim.x) * blockDim.x) {
    float* row = x + (r / n_heads) * row_stride + (r % n_heads) * head_dim;
    if (kRounding == KvRowRounding::Bf16)
      kv_rounding::round_bf16(row, head_dim);
    else
      kv_rounding::round_i8_row(row, head_dim);
  }
}

}  // namespace

void round_kv_rows(KvRowRounding rounding, float* x, int64_t n_tokens, int64_t row_stride, int n_heads, int head_dim,
                   const Stream& stream) {
  if (rounding == KvRowRounding::None || n_tokens <= 0) return;
  const int64_t rows = n_tokens * n_heads;
  const int64_t blocks = (rows + kThreads - 1) / kThreads;
  const unsigned grid = unsigned(blocks < 65536 ? blocks : 65536);
  if (rounding == KvRowRounding::Bf16)
    round_rows_kernel<KvRowRounding::Bf16><<<grid, kThreads, 0, detail::native(stream)>>>(x, n_tokens, row_stride, n_heads, head_dim);
  else
    round_rows_kernel<KvRowRounding::I8><<<grid, kThreads, 0, detail::native(stream)>>>(x, n_tokens, row_stride, n_heads, head_dim);
  detail::check_launch("round_kv_rows");
}

}  // namespace kvg::cuda
