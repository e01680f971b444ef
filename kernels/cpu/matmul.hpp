// Matrix products and dot products under the f32-portable-v1 recipe.
//
// Every output element is one dot product computed by exactly one thread in
// one fixed order (docs/recipe.md): lane i of 16 accumulates, with a fused
// multiply-add, the products of elements k ≡ i (mod 16) in increasing k; the
// lanes are then combined by the pairwise tree of reduce_lanes(). Tiling,
// batching, threads and ISA change which dot products run together, never
// how one is computed — so all of them give identical bits.
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.hpp"
#include "kernels/cpu/thread_pool.hpp"
#include "kernels/cpu/weights.hpp"

namespace kvg {

// y[t * y_stride + r] = dot(row r of w, x + t * x_stride) for every token
// t < n_tokens and row r < w.rows.
void matmul(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t n_tokens, float* y,
            int64_t y_stride, ThreadPool& pool, Isa isa);

// The same dot product between two fp32 vectors.
float dot_f32(const float* a, const float* b, int64_t n, Isa isa);

namespace detail {
// One ISA's serial kernel over the block rows [r0, r1) x tokens [t0, t1).
using MatmulBlockFn = void (*)(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t t0,
                               int64_t t1, int64_t r0, int64_t r1, float* y, int64_t y_stride);
using DotFn = float (*)(const float* a, const float* b, int64_t n);

void matmul_block_scalar(const WeightMatrix&, const float*, int64_t, int64_t, int64_t, int64_t, int64_t,
                         float*, int64_t);
void matmul_block_avx2(const WeightMatrix&, const float*, int64_t, int64_t, int64_t, int64_t, int64_t,
                       float*, int64_t);
void matmul_block_avx512(const WeightMatrix&, const float*, int64_t, int64_t, int64_t, int64_t, int64_t,
                         float*, int64_t);
// Rows [r0, r1) of w as fp32, row after row (the same values as dequantize_row).
void dequantize_rows_avx512(const WeightMatrix& w, int64_t r0, int64_t r1, float* out);
float dot_scalar(const float* a, const float* b, int64_t n);
float dot_avx2(const float* a, const float* b, int64_t n);
float dot_avx512(const float* a, const float* b, int64_t n);
}  // namespace detail

}  // namespace kvg
