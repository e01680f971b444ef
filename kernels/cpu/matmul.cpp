#include "kernels/cpu/dequantize.hpp"
#include "kernels/cpu/matmul.hpp"

#include <algorithm>
#include <vector>

namespace kvg {

namespace {

detail::MatmulBlockFn block_fn(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return detail::matmul_block_avx512;
    case Isa::Avx2: return detail::matmul_block_avx2;
    case Isa::Scalar: break;
  }
  return detail::matmul_block_scalar;
}

// Rows per task: enough to amortise dispatch, small enough to spread a decode
// step (one token) over every thread.
int64_t rows_per_task(const WeightMatrix& w, int64_t n_tokens, int threads) {
  if (threads <= 1) return w.rows;
  const int64_t per_thread = (w.rows + threads * 4 - 1) / (threads * 4);
  return std::clamp<int64_t>(per_thread, 16, n_tokens > 1 ? 64 : 256) / 8 * 8;
}

// Tokens per task pass: the block of activations reused against one row block.
constexpr int64_t kTokenBlock = 64;
// From this many tokens on, a task first dequantizes its rows to fp32 once
// and runs the fp32 kernel over every token: the values are the exact same
// floats, so the bits are too, but the decoding cost is paid once per row
// instead of once per token tile.
constexpr int64_t kDequantizeMinTokens = 8;

}  // namespace

void matmul(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t n_tokens, float* y,
            int64_t y_stride, ThreadPool& pool, Isa isa) {
  if (n_tokens <= 0 || w.rows <= 0) return;
  const detail::MatmulBlockFn fn = block_fn(isa);
  const int64_t rows_step = std::max<int64_t>(8, rows_per_task(w, n_tokens, pool.size()));
  const int64_t n_row_tasks = (w.rows + rows_step - 1) / rows_step;
  const bool dequantize_first = n_tokens >= kDequantizeMinTokens && w.type != WeightType::F32;
  pool.run(size_t(n_row_tasks), [&](size_t task) {
    const int64_t r0 = int64_t(task) * rows_step;
    const int64_t r1 = std::min(w.rows, r0 + rows_step);
    if (dequantize_first) {
      thread_local std::vector<float> rows_f32;
      rows_f32.resize(size_t((r1 - r0) * w.cols));
      if (isa == Isa::Avx512)
        detail::dequantize_rows_avx512(w, r0, r1, rows_f32.data());
      else
        for (int64_t r = r0; r < r1; ++r) dequantize_row(w, r, rows_f32.data() + (r - r0) * w.cols);
      const WeightMatrix block{WeightType::F32, reinterpret_cast<const uint8_t*>(rows_f32.data()), r1 - r0, w.cols,
                               size_t(w.cols) * sizeof(float)};
      for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokenBlock)
        fn(block, x, x_stride, t0, std::min(n_tokens, t0 + kTokenBlock), 0, r1 - r0, y + r0, y_stride);
      return;
    }
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokenBlock)
      fn(w, x, x_stride, t0, std::min(n_tokens, t0 + kTokenBlock), r0, r1, y, y_stride);
  });
}

float dot_f32(const float* a, const float* b, int64_t n, Isa isa) {
  switch (isa) {
    case Isa::Avx512: return detail::dot_avx512(a, b, n);
    case Isa::Avx2: return detail::dot_avx2(a, b, n);
    case Isa::Scalar: break;
  }
  return detail::dot_scalar(a, b, n);
}

}  // namespace kvg
