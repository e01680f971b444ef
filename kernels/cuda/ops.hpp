// Element-wise and per-row operations of the recipe on the GPU, each the
// same sequence of IEEE operations as its kernels/cpu/ops.hpp counterpart.
// All pointers are device pointers; every call is asynchronous on `stream`.
#pragma once

#include <cstdint>

#include "kernels/cpu/ops.hpp"
#include "kernels/cpu/weights.hpp"
#include "kernels/cuda/device_memory.hpp"

namespace kvg::cuda {

// x[t * table.cols + k] = element k of row tokens[t] of `table`, dequantized
// exactly (dequantize_row). Token ids must already be valid rows.
void embed_rows(const WeightMatrix& table, const int32_t* tokens, int64_t n_tokens, float* x, const Stream& stream);

// For each of n_rows rows of n floats (rows contiguous):
// y = (x * (1 / sqrt(dot(x, x) / n + eps))) * w.
void rmsnorm(const float* x, const float* w, int64_t n_rows, int64_t n, float eps, float* y, const Stream& stream);

// For each of n_rows rows of n floats: LayerNorm with bias b, as
// kernels/cpu/ops.hpp's layernorm (starcoder2's block and output norms).
void layernorm(const float* x, const float* w, const float* b, int64_t n_rows, int64_t n, float eps, float* y,
               const Stream& stream);

// Each head (head_dim floats, n_heads per token, tokens row_stride floats
// apart) normalised in place with weights w: rmsnorm of kernels/cpu/ops.hpp
// with n = head_dim (qwen3 / gemma3 q/k norm).
void rmsnorm_heads(float* x, int64_t n_tokens, int64_t row_stride, int n_heads, int head_dim, const float* w, float eps,
                   const Stream& stream);

// Rotates the first rope_dim features of n_heads heads (head_dim apart) in
// each of n_tokens rows (row_stride floats apart). Row t uses the angles
// cos[t * rope_dim/2 ..], sin[t * rope_dim/2 ..] — the host's RopeTable
// values for that row's position, uploaded, never recomputed here.
void apply_rope(float* x, int64_t n_tokens, int64_t row_stride, int n_heads, int head_dim, int rope_dim,
                const float* cos, const float* sin, RopeStyle style, const Stream& stream);

// out[i] = silu(gate[i]) * up[i]; out may be gate.
void swiglu(const float* gate, const float* up, float* out, int64_t n, const Stream& stream);

// out[i] = gelu_tanh(gate[i]) * up[i]; out may be gate.
void geglu(const float* gate, const float* up, float* out, int64_t n, const Stream& stream);

// x[i] = gelu_tanh_f32(x[i]) (kernels/cpu/ops.hpp's gelu_inplace).
void gelu_inplace(float* x, int64_t n, const Stream& stream);

// x[i] = x[i] * s.
void scale_inplace(float* x, float s, int64_t n, const Stream& stream);

// x[i] = softcap_f32(x[i], cap).
void softcap_inplace(float* x, float cap, int64_t n, const Stream& stream);

// x[i] += delta[i].
void add_inplace(float* x, const float* delta, int64_t n, const Stream& stream);

// x[r * row_stride + i] += delta[i] for r < n_rows, i < n (a bias on every row).
void add_to_rows(float* x, int64_t n_rows, int64_t row_stride, const float* delta, int64_t n, const Stream& stream);

// dst[r * dst_stride + i] = src[r * src_stride + i] for r < n_rows, i < n:
// rows moved between strided layouts (a batched pass's new KV rows into
// each sequence's mirror), bit for bit.
void copy_rows(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t n_rows, int64_t n,
               const Stream& stream);

// out[i] = exp_f32(in[i]): the recipe's exp alone, so tests can compare it
// with the CPU definition over arbitrary inputs.
void exp_values(const float* in, float* out, int64_t n, const Stream& stream);

}  // namespace kvg::cuda
