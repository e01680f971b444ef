#include "kernels/cuda/ops.hpp"

#include "common/error.hpp"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/recipe_math.cuh"

namespace kvg::cuda {

namespace {

using detail::native;

constexpr int kThreads = 256;

// Grid-stride loops: any n fits a bounded grid.
inline unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return unsigned(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

__device__ __forceinline__ int64_t first_index() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t index_stride() { return int64_t(gridDim.x) * blockDim.x; }

template <WeightType kType>
__global__ void embed_kernel(const uint8_t* table, int64_t row_bytes, int64_t cols, const int32_t* tokens,
                             int64_t n_tokens, float* x) {
  for (int64_t i = first_index(); i < n_tokens * cols; i += index_stride()) {
    const int64_t t = i / cols, k = i % cols;
    x[i] = detail::weight_at<kType>(table + int64_t(tokens[t]) * row_bytes, k);
  }
}

// One block per row. The first warp computes the mean square with the
// recipe's dot product (its second half-warp repeats the first's work, so
// the whole warp takes part in the shuffles); then every thread scales.
// Row r sits at (r / per_group) * group_stride + (r % per_group) * n (a
// plain row-major matrix has per_group 1 and group_stride n).
__global__ void rmsnorm_kernel(const float* x, const float* w, int64_t n, float eps, float* y, int64_t per_group,
                               int64_t group_stride) {
  __shared__ float inv_shared;
  const int64_t row = int64_t(blockIdx.x);
  const int64_t offset = (row / per_group) * group_stride + (row % per_group) * n;
  const float* xr = x + offset;
  float* yr = y + offset;
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x % detail::kLanes;
    const float acc = detail::lane_chain(xr, n, lane, [](float a, float v) { return __fmaf_rn(v, v, a); });
    const float sum = detail::reduce_half_warp(acc);
    if (threadIdx.x == 0) {
      const float mean_square = __fdiv_rn(sum, float(n));
      inv_shared = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean_square, eps)));  // not rsqrt: two IEEE roundings
    }
  }
  __syncthreads();
  const float inv = inv_shared;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = __fmul_rn(__fmul_rn(xr[i], inv), w[i]);
}

// One block per row: LayerNorm with its bias, as kernels/cpu/ops.cpp's
// layernorm. The first warp sums the row in the recipe's 16 lanes for the
// mean, every thread centres its features, then the first warp takes the
// recipe's dot product of the centred row for the variance (its second
// half-warp repeating the first's work, as in rmsnorm_kernel).
__global__ void layernorm_kernel(const float* x, const float* w, const float* b, int64_t n, float eps, float* y) {
  __shared__ float mean_shared, inv_shared;
  const int64_t row = int64_t(blockIdx.x);
  const float* xr = x + row * n;
  float* yr = y + row * n;
  const int lane = threadIdx.x % detail::kLanes;
  if (threadIdx.x < 32) {
    const float acc = detail::lane_chain(xr, n, lane, [](float a, float v) { return __fadd_rn(a, v); });
    const float sum = detail::reduce_half_warp(acc);
    if (threadIdx.x == 0) mean_shared = __fdiv_rn(sum, float(n));
  }
  __syncthreads();
  const float mean = mean_shared;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = __fsub_rn(xr[i], mean);
  __syncthreads();
  if (threadIdx.x < 32) {
    const float acc = detail::lane_chain(yr, n, lane, [](float a, float v) { return __fmaf_rn(v, v, a); });
    const float sum = detail::reduce_half_warp(acc);
    if (threadIdx.x == 0) inv_shared = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(sum, float(n)), eps)));
  }
  __syncthreads();
  const float inv = inv_shared;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = __fadd_rn(__fmul_rn(__fmul_rn(yr[i], inv), w[i]), b[i]);
}

// One thread per (token, head, pair).
__global__ void rope_kernel(float* x, int64_t n_tokens, int64_t row_stride, int n_heads, int head_dim, int half,
                            const float* cos, const float* sin, bool adjacent) {
  const int64_t per_token = int64_t(n_heads) * half;
  for (int64_t i = first_index(); i < n_tokens * per_token; i += index_stride()) {
    const int64_t t = i / per_token;
    const int h = int((i % per_token) / half);
    const int p = int(i % half);
    float* head = x + t * row_stride + int64_t(h) * head_dim;
    float* a = adjacent ? head + 2 * p : head + p;
    float* b = adjacent ? head + 2 * p + 1 : head + p + half;
    const float c = cos[t * half + p], s = sin[t * half + p];
    const float av = *a, bv = *b;
    *a = __fsub_rn(__fmul_rn(av, c), __fmul_rn(bv, s));
    *b = __fadd_rn(__fmul_rn(av, s), __fmul_rn(bv, c));
  }
}

__global__ void swiglu_kernel(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = first_index(); i < n; i += index_stride()) out[i] = __fmul_rn(detail::silu_f32(gate[i]), up[i]);
}

__global__ void geglu_kernel(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = first_index(); i < n; i += index_stride())
    out[i] = __fmul_rn(detail::gelu_tanh_f32(gate[i]), up[i]);
}

__global__ void gelu_kernel(float* x, int64_t n) {
  for (int64_t i = first_index(); i < n; i += index_stride()) x[i] = detail::gelu_tanh_f32(x[i]);
}

__global__ void scale_kernel(float* x, float s, int64_t n) {
  for (int64_t i = first_index(); i < n; i += index_stride()) x[i] = __fmul_rn(x[i], s);
}

__global__ void softcap_kernel(float* x, float cap, int64_t n) {
  for (int64_t i = first_index(); i < n; i += index_stride()) x[i] = detail::softcap_f32(x[i], cap);
}

__global__ void add_kernel(float* x, const float* delta, int64_t n) {
  for (int64_t i = first_index(); i < n; i += index_stride()) x[i] = __fadd_rn(x[i], delta[i]);
}

__global__ void add_rows_kernel(float* x, int64_t n_rows, int64_t row_stride, const float* delta, int64_t n) {
  for (int64_t i = first_index(); i < n_rows * n; i += index_stride()) {
    float* v = x + (i / n) * row_stride + i % n;
    *v = __fadd_rn(*v, delta[i % n]);
  }
}

__global__ void copy_rows_kernel(float* dst, int64_t dst_stride, const float* src, int64_t src_stride,
                                 int64_t n_rows, int64_t n) {
  for (int64_t i = first_index(); i < n_rows * n; i += index_stride())
    dst[(i / n) * dst_stride + i % n] = src[(i / n) * src_stride + i % n];
}

__global__ void exp_kernel(const float* in, float* out, int64_t n) {
  for (int64_t i = first_index(); i < n; i += index_stride()) out[i] = detail::exp_f32(in[i]);
}

}  // namespace

void embed_rows(const WeightMatrix& table, const int32_t* tokens, int64_t n_tokens, float* x, const Stream& stream) {
  if (n_tokens <= 0) return;
  const unsigned grid = grid_for(n_tokens * table.cols);
  const int64_t rb = int64_t(table.row_bytes);
  with_weight_type(table.type, [&](auto type) {
    embed_kernel<decltype(type)::value>
        <<<grid, kThreads, 0, native(stream)>>>(table.data, rb, table.cols, tokens, n_tokens, x);
  });
  detail::check_launch("embedding kernel launch");
}

void rmsnorm(const float* x, const float* w, int64_t n_rows, int64_t n, float eps, float* y, const Stream& stream) {
  if (n_rows <= 0) return;
  if (n_rows > int64_t(0x7fffffff)) throw Error(ErrorCode::Internal, "cuda::rmsnorm: too many rows");
  rmsnorm_kernel<<<unsigned(n_rows), 128, 0, native(stream)>>>(x, w, n, eps, y, 1, n);
  detail::check_launch("rmsnorm kernel launch");
}

void layernorm(const float* x, const float* w, const float* b, int64_t n_rows, int64_t n, float eps, float* y,
               const Stream& stream) {
  if (n_rows <= 0) return;
  if (n_rows > int64_t(0x7fffffff)) throw Error(ErrorCode::Internal, "cuda::layernorm: too many rows");
  layernorm_kernel<<<unsigned(n_rows), 128, 0, native(stream)>>>(x, w, b, n, eps, y);
  detail::check_launch("layernorm kernel launch");
}

void rmsnorm_heads(float* x, int64_t n_tokens, int64_t row_stride, int n_heads, int head_dim, const float* w, float eps,
                   const Stream& stream) {
  const int64_t rows = n_tokens * n_heads;
  if (rows <= 0) return;
  if (rows > int64_t(0x7fffffff)) throw Error(ErrorCode::Internal, "cuda::rmsnorm_heads: too many rows");
  rmsnorm_kernel<<<unsigned(rows), 128, 0, native(stream)>>>(x, w, head_dim, eps, x, n_heads, row_stride);
  detail::check_launch("head rmsnorm kernel launch");
}

void geglu(const float* gate, const float* up, float* out, int64_t n, const Stream& stream) {
  if (n <= 0) return;
  geglu_kernel<<<grid_for(n), kThreads, 0, native(stream)>>>(gate, up, out, n);
  detail::check_launch("geglu kernel launch");
}

void scale_inplace(float* x, float s, int64_t n, const Stream& stream) {
  if (n <= 0) return;
  scale_kernel<<<grid_for(n), kThreads, 0, native(stream)>>>(x, s, n);
  detail::check_launch("scale kernel launch");
}

void gelu_inplace(float* x, int64_t n, const Stream& stream) {
  if (n <= 0) return;
  gelu_kernel<<<grid_for(n), kThreads, 0, native(stream)>>>(x, n);
  detail::check_launch("gelu kernel launch");
}

void softcap_inplace(float* x, float cap, int64_t n, const Stream& stream) {
  if (n <= 0) return;
  softcap_kernel<<<grid_for(n), kThreads, 0, native(stream)>>>(x, cap, n);
  detail::check_launch("softcap kernel launch");
}

void apply_rope(float* x, int64_t n_tokens, int64_t row_stride, int n_heads, int head_dim, int rope_dim,
                const float* cos, const float* sin, RopeStyle style, const Stream& stream) {
  const int half = rope_dim / 2;
  if (n_tokens <= 0 || half <= 0 || n_heads <= 0) return;
  rope_kernel<<<grid_for(n_tokens * n_heads * half), kThreads, 0, native(stream)>>>(
      x, n_tokens, row_stride, n_heads, head_dim, half, cos, sin, style == RopeStyle::AdjacentPairs);
  detail::check_launch("rope kernel launch");
}

void swiglu(const float* gate, const float* up, float* out, int64_t n, const Stream& stream) {
  if (n <= 0) return;
  swiglu_kernel<<<grid_for(n), kThreads, 0, native(stream)>>>(gate, up, out, n);
  detail::check_launch("swiglu kernel launch");
}

void add_inplace(float* x, const float* delta, int64_t n, const Stream& stream) {
  if (n <= 0) return;
  add_kernel<<<grid_for(n), kThreads, 0, native(stream)>>>(x, delta, n);
  detail::check_launch("residual add kernel launch");
}

void add_to_rows(float* x, int64_t n_rows, int64_t row_stride, const float* delta, int64_t n, const Stream& stream) {
  if (n_rows <= 0 || n <= 0) return;
  add_rows_kernel<<<grid_for(n_rows * n), kThreads, 0, native(stream)>>>(x, n_rows, row_stride, delta, n);
  detail::check_launch("bias add kernel launch");
}

void copy_rows(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t n_rows, int64_t n,
               const Stream& stream) {
  if (n_rows <= 0 || n <= 0) return;
  copy_rows_kernel<<<grid_for(n_rows * n), kThreads, 0, native(stream)>>>(dst, dst_stride, src, src_stride, n_rows, n);
  detail::check_launch("row copy kernel launch");
}

void exp_values(const float* in, float* out, int64_t n, const Stream& stream) {
  if (n <= 0) return;
  exp_kernel<<<grid_for(n), kThreads, 0, native(stream)>>>(in, out, n);
  detail::check_launch("exp kernel launch");
}

}  // namespace kvg::cuda
