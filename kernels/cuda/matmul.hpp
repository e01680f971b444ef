// The recipe's matrix product on the GPU (docs/recipe.md, kernels/cpu/matmul.hpp).
//
// Each output element is one dot product computed by one group of 16
// threads (a half-warp): thread i is lane i of the recipe and accumulates,
// with __fmaf_rn, the products of elements k ≡ i (mod 16) in increasing k;
// the group then combines its 16 lanes by the recipe's pairwise tree. Tiles
// over tokens and rows only decide which dot products run together, never
// how one is computed, so the result is bit-identical to the CPU kernels for
// any batch size and either kernel shape (decode or prefill).
#pragma once

#include <cstdint>
#include <span>

#include "kernels/cuda/device_memory.hpp"
#include "kernels/cuda/matmul_output.hpp"

namespace kvg::cuda {

// For every output o and token t < n_tokens: o.y[t * o.y_stride + r] =
// dot(row r of o.w, x + t * x_stride) for r < o.w.rows. Every o.w.cols must
// be equal (the width of x). Asynchronous on `stream`.
void matmul(std::span<const MatmulOutput> outputs, const float* x, int64_t x_stride, int64_t n_tokens,
            const Stream& stream);

}  // namespace kvg::cuda
