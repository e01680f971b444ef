// Recipe q8-portable-v1 on the GPU (docs/recipe.md, kernels/cpu/matmul_q8.hpp):
// matrix products of block-quantized weights with activations quantized to
// int8 per block.
//
// Two kernels. The first quantizes each block of x exactly as the recipe
// says (block max, 127/amax and amax/127 with __fdiv_rn, __float2int_rn,
// sub-block sums). The second gives each output element to one warp: the
// integer sums of its weight blocks (__dp4a) are spread over lanes and
// combined in integers, which is exact in any order; the float terms
// fma(float(I), d*dx, acc) of one element are then applied by one lane, in
// increasing block order. Tokens and rows only decide which elements run
// together, so the bits are those of matmul_q8(..., Isa::Scalar) for any
// batch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/cuda/device_memory.hpp"
#include "kernels/cuda/matmul.hpp"

namespace kvg::cuda {

// Device bytes matmul_q8() needs as scratch for the quantized activations of
// n_tokens rows of `cols` elements (for both activation block sizes).
size_t matmul_q8_scratch_bytes(int64_t cols, int64_t n_tokens);

// As matmul() (kernels/cuda/matmul.hpp), under q8-portable-v1: outputs whose
// matrix is block-quantized use the q8 kernels, F32/F16/BF16 ones matmul()'s
// f32 arithmetic. `scratch` is device memory of at least
// matmul_q8_scratch_bytes(cols, n_tokens) bytes, free for the whole call's
// work on `stream`. Asynchronous on `stream`.
void matmul_q8(std::span<const MatmulOutput> outputs, const float* x, int64_t x_stride, int64_t n_tokens,
               void* scratch, size_t scratch_bytes, const Stream& stream);

}  // namespace kvg::cuda
