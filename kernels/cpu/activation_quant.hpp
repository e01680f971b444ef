// Step 1 of recipe q8-portable-v1 (docs/recipe.md): each token's activation
// row is quantized per block of 32 or 256 elements to int8 with one binary32
// scale per block, plus the exact sums of every 16 consecutive int8 values
// (the sub-block sums S_j of any format are sums of these). Every step is
// exact or one IEEE operation, so every ISA and the GPU get the same integers.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/thread_pool.hpp"

namespace kvg {

struct Q8Activations {
  int block = 32;     // elements per quantization block (q8_activation_block)
  int64_t cols = 0;   // elements per token (a multiple of block)
  int64_t n_tokens = 0;
  std::vector<int8_t> q;        // token t's elements at q[t * cols]
  std::vector<float> dx;        // token t, block b: dx[t * blocks() + b]
  std::vector<int16_t> sums16;  // Σ q over elements [16j, 16j + 16) of token t: sums16[t * cols / 16 + j]

  int64_t blocks() const { return cols / block; }
  const int8_t* q_row(int64_t t) const { return q.data() + t * cols; }
  const float* dx_row(int64_t t) const { return dx.data() + t * blocks(); }
  const int16_t* sums16_row(int64_t t) const { return sums16.data() + t * (cols / 16); }
};

// Quantizes one block of n elements into q[0..n) and returns its dx.
float quantize_activation_block(const float* x, int n, int8_t* q);

// Quantizes n_tokens rows of cols elements (row t at x + t * x_stride) into
// out, spreading the tokens over the pool (each token on its own: the
// result cannot depend on the threads).
void quantize_activations(const float* x, int64_t x_stride, int64_t n_tokens, int64_t cols, int block,
                          ThreadPool& pool, Q8Activations& out);

}  // namespace kvg
