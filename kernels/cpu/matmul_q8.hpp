// Matrix products under recipe q8-portable-v1 (docs/recipe.md): for a weight
// matrix in a block-quantized format, each token's activations are quantized
// per block to int8 (activation_quant.hpp), every block's integer dot
// products are computed exactly in int32, and the block terms are added to
// one binary32 accumulator per output element with fused multiply-adds, block
// after block in increasing order. Integer sums have one value whatever their
// order, so SIMD may run rows and tokens side by side in any arrangement;
// the float steps are fixed per element. The bits depend on (w_row, x) only:
// not on the batch, the threads or the ISA.
//
// Names kept in step with the CUDA kernels: matmul_q8, q8_applies,
// q8_activation_block; matmul_q8(..., Isa::Scalar) is the executable
// definition every other path is tested against.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/cpu/activation_quant.hpp"
#include "kernels/cpu/isa.hpp"
#include "kernels/cpu/q8_panels.hpp"
#include "kernels/cpu/thread_pool.hpp"
#include "kernels/cpu/weights.hpp"

namespace kvg {

// True for the block-quantized formats (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K).
bool q8_applies(WeightType t);
// Elements per activation quantization block for a format: 32 for Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1; 256 for the K-quants.
int q8_activation_block(WeightType t);

// The contract of matmul() (matmul.hpp): y[t * y_stride + r] = row r of w
// times token t's x, for t < n_tokens, r < w.rows; computed as recipe
// q8-portable-v1 says. F32, F16 and BF16 matrices forward to matmul()
// (f32-portable-v1 arithmetic).
void matmul_q8(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t n_tokens, float* y,
               int64_t y_stride, ThreadPool& pool, Isa isa);

// One product of matmul_q8_same_input: w times the shared input, into y.
struct Q8Product {
  const WeightMatrix* w;
  float* y;
  int64_t y_stride;
};

// matmul_q8 for each product, all of the same input rows x (a layer's q, k
// and v, or its gate and up): when every matrix has one format and width,
// the rows are quantized, and their token panels built, once for all of
// them instead of once each. The same bits as the separate calls (the
// quantized rows are a function of x alone); otherwise it makes them.
void matmul_q8_same_input(std::span<const Q8Product> products, const float* x, int64_t x_stride, int64_t n_tokens,
                          ThreadPool& pool, Isa isa);

// Times this thread has quantized activations for a product (for tests:
// what matmul_q8_same_input saves).
uint64_t q8_activation_quantizations();

namespace detail {
// Up to a few tokens the SIMD kernels run Q8_0, Q4_K and Q6_K rows with one
// row per lane (matmul_q8_decode_kernel.hpp), which reads each token's
// weights again from the cache, and need no token panels; past the count
// where 16-lane panels win (measured on Zen 4), they use the panels.
inline int64_t q8_decode_max_tokens(WeightType t) {
  switch (t) {
    case WeightType::Q8_0: return 2;
    case WeightType::Q4_K: return 6;
    case WeightType::Q6_K: return 8;
    default: return 0;
  }
}
inline bool q8_decode_path(WeightType t, int64_t n_tokens) { return n_tokens <= q8_decode_max_tokens(t); }

// From 2 to 16 tokens (a batch of decode rows) the AVX-512 VNNI kernel runs
// Q8_0 with two rows per register over one or two 8-token panels
// (matmul_q8_avx512.cpp), where the one-row-per-lane kernel reads the
// weights again per token and 16-lane panels leave lanes idle. Measured on
// this machine (Zen 5, 2 threads, 1.1B Q8_0, `kvg bench -b N`): decode
// tokens/s at 2 / 8 / 12 / 16 sequences 32 -> 38, 72 -> 117, 113 -> 146,
// 106 -> 162.
constexpr int kQ8PairLanes = 8;
inline bool q8_pair_path(WeightType t, int64_t n_tokens) {
  return t == WeightType::Q8_0 && n_tokens >= 2 && n_tokens <= 2 * kQ8PairLanes;
}

// Just past 16 tokens (an engine worker's pass of 16 decode rows that a
// few prompt tokens joined) the row-pair kernel on the first 16 and the
// few-token kernels on the rest beat 16-lane panels over all of them, whose
// second panel is mostly empty; from 25 tokens on the panels win. Measured
// (2026-12-04, 2 threads, 1.1B Q8_0, `kvg bench -b N`, decode tok/s, panels
// against split, alternated): 17: 135 / 154, 144 / 137; 20: 130 / 153,
// 141 / 142; 24: 147 / 169, 150 / 177; 27: 203 / 181, 192 / 193; 32: 227 /
// 198, 214 / 203; again for 17..24: 17: 150 / 180, 140 / 174; 20: 144 /
// 163, 145 / 180; 24: 183 / 177, 175 / 182. Every token's product is the same bits in any kernel and
// beside any other tokens (tests/kernels), so the split changes no result.
inline bool q8_split_pairs(WeightType t, int64_t n_tokens) {
  return t == WeightType::Q8_0 && n_tokens > 2 * kQ8PairLanes && n_tokens <= 3 * kQ8PairLanes;
}

// Formats whose integers are never negative (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K):
// the SIMD kernels multiply them as unsigned bytes with the signed q
// directly, so their token panels hold q itself (no offset to remove).
constexpr bool q8_unsigned_weights(WeightType t) {
  return t == WeightType::Q4_1 || t == WeightType::Q5_1 || t == WeightType::Q2_K || t == WeightType::Q4_K ||
         t == WeightType::Q5_K;
}

// One kernel's serial work: rows [r0, r1) of w for every token of a (the
// SIMD kernels read the same activations laid out as panels).
using MatmulQ8BlockFn = void (*)(const WeightMatrix& w, const Q8Activations& a, const Q8Panels& panels,
                                 int64_t r0, int64_t r1, float* y, int64_t y_stride);

void matmul_q8_block_scalar(const WeightMatrix&, const Q8Activations&, const Q8Panels&, int64_t, int64_t, float*,
                            int64_t);
void matmul_q8_block_avx2(const WeightMatrix&, const Q8Activations&, const Q8Panels&, int64_t, int64_t, float*,
                          int64_t);
void matmul_q8_block_avx512(const WeightMatrix&, const Q8Activations&, const Q8Panels&, int64_t, int64_t, float*,
                            int64_t);
}  // namespace detail

}  // namespace kvg
