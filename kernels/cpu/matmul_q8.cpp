#include "kernels/cpu/matmul_q8.hpp"

#include <algorithm>
#include <string>

#include "common/error.hpp"
#include "kernels/cpu/matmul.hpp"

namespace kvg {

bool q8_applies(WeightType t) { return t != WeightType::F32 && t != WeightType::F16 && t != WeightType::BF16; }

int q8_activation_block(WeightType t) { return weight_block_elements(t); }

namespace {

// The AVX-512 kernels use VNNI's vpdpbusd; a CPU with AVX-512 but without
// VNNI runs the AVX2 kernels (the same bits, as every path).
bool cpu_has_avx512_vnni() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

struct Kernel {
  detail::MatmulQ8BlockFn fn;
  int lanes;        // tokens per panel (0: no panels)
  int offset;       // panel byte = q + offset
  bool row_pairs;   // runs q8_pair_path's token counts on 8-lane panels of q
};

Kernel kernel_for(Isa isa) {
  static const bool vnni = cpu_has_avx512_vnni();
  if (isa == Isa::Avx512 && vnni) return {detail::matmul_q8_block_avx512, 16, 128, true};
  if (isa == Isa::Avx512 || isa == Isa::Avx2) return {detail::matmul_q8_block_avx2, 8, 0, false};
  return {detail::matmul_q8_block_scalar, 0, 0, false};
}

// Rows per task: a multiple of the kernels' row groups (4), enough to amortise
// dispatch, small enough to spread a decode step over every thread.
int64_t rows_per_task(int64_t rows, int threads) {
  if (threads <= 1) return rows;
  const int64_t per_thread = (rows + threads * 4 - 1) / (threads * 4);
  return std::clamp<int64_t>(per_thread, 16, 256) / 8 * 8;
}

// The activations of one product, quantized for w's format, and the token
// panels w's kernel reads (none on the few-token paths). Quantized once per
// product, shared by every task (thread_local: the calling thread's
// buffers, reused across calls; the tasks see them by these references, a
// thread_local named inside a task would be the worker's own).
struct Prepared {
  Q8Activations& acts;
  Q8Panels& panels;
};

thread_local uint64_t quantizations = 0;

Prepared prepare(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t n_tokens, const Kernel& kernel,
                 ThreadPool& pool) {
  const int block = q8_activation_block(w.type);
  if (w.cols % block != 0)
    throw Error(ErrorCode::InvalidArgument, std::string("matmul_q8: a ") + weight_type_name(w.type) + " matrix of " +
                                                std::to_string(w.cols) + " columns is not whole blocks of " +
                                                std::to_string(block));
  thread_local Q8Activations acts_buffer;
  thread_local Q8Panels panels_buffer;
  const Prepared p{acts_buffer, panels_buffer};
  quantize_activations(x, x_stride, n_tokens, w.cols, block, pool, p.acts);
  ++quantizations;
  p.panels.lanes = 0;
  if (kernel.row_pairs && detail::q8_pair_path(w.type, n_tokens))
    build_q8_panels(p.acts, detail::kQ8PairLanes, 0, p.panels);
  else if (kernel.lanes > 0 && !detail::q8_decode_path(w.type, n_tokens))
    build_q8_panels(p.acts, kernel.lanes, detail::q8_unsigned_weights(w.type) ? 0 : kernel.offset, p.panels);
  return p;
}

// w's rows over the prepared activations, spread over the pool.
void run_rows(const WeightMatrix& w, const Prepared& p, float* y, int64_t y_stride, const Kernel& kernel,
              ThreadPool& pool) {
  const int64_t rows_step = std::max<int64_t>(8, rows_per_task(w.rows, pool.size()));
  const int64_t n_tasks = (w.rows + rows_step - 1) / rows_step;
  pool.run(size_t(n_tasks), [&](size_t task) {
    const int64_t r0 = int64_t(task) * rows_step;
    kernel.fn(w, p.acts, p.panels, r0, std::min(w.rows, r0 + rows_step), y, y_stride);
  });
}

}  // namespace

void matmul_q8(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t n_tokens, float* y,
               int64_t y_stride, ThreadPool& pool, Isa isa) {
  if (!q8_applies(w.type)) return matmul(w, x, x_stride, n_tokens, y, y_stride, pool, isa);
  if (n_tokens <= 0 || w.rows <= 0) return;
  const Kernel kernel = kernel_for(isa);
  if (kernel.row_pairs && detail::q8_split_pairs(w.type, n_tokens)) {
    const int64_t first = 2 * detail::kQ8PairLanes;
    matmul_q8(w, x, x_stride, first, y, y_stride, pool, isa);
    return matmul_q8(w, x + first * x_stride, x_stride, n_tokens - first, y + first * y_stride, y_stride, pool, isa);
  }
  run_rows(w, prepare(w, x, x_stride, n_tokens, kernel, pool), y, y_stride, kernel, pool);
}

void matmul_q8_same_input(std::span<const Q8Product> products, const float* x, int64_t x_stride, int64_t n_tokens,
                          ThreadPool& pool, Isa isa) {
  if (products.empty() || n_tokens <= 0) return;
  const WeightMatrix& first = *products.front().w;
  const Kernel kernel = kernel_for(isa);
  bool shared = q8_applies(first.type) && !(kernel.row_pairs && detail::q8_split_pairs(first.type, n_tokens));
  for (const Q8Product& p : products) shared = shared && p.w->type == first.type && p.w->cols == first.cols;
  if (!shared) {
    for (const Q8Product& p : products) matmul_q8(*p.w, x, x_stride, n_tokens, p.y, p.y_stride, pool, isa);
    return;
  }
  const Prepared prepared = prepare(first, x, x_stride, n_tokens, kernel, pool);
  for (const Q8Product& p : products)
    if (p.w->rows > 0) run_rows(*p.w, prepared, p.y, p.y_stride, kernel, pool);
}

uint64_t q8_activation_quantizations() { return quantizations; }

}  // namespace kvg
