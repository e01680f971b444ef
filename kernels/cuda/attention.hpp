// Causal attention on the GPU in the recipe's fixed blocks (docs/recipe.md,
// kernels/cpu/attention.hpp): keys in blocks of 32 absolute positions, an
// online softmax merged block by block in increasing order, every sum in the
// CPU kernel's order. A query's result depends only on the query and the
// cache rows up to its position, as on the CPU.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_memory.hpp"

namespace kvg::cuda {

struct AttentionShape {
  int n_head = 0;
  int n_head_kv = 0;  // query head h reads KV head h / (n_head / n_head_kv)
  int head_dim = 0;   // at most 512, as on the CPU
  float scale = 0;    // 1 / sqrt(head_dim), computed by the caller as the CPU does
  // kernels/cpu/attention.hpp's AttentionExtras: > 0, a query at p sees keys
  // (p - window, p] only (the blocks stay aligned to absolute positions);
  // > 0, every score becomes softcap_f32(score, softcap).
  int64_t window = 0;
  float softcap = 0;
};

// For tokens t < n_tokens at absolute positions p0 + t and heads h:
// out[t * out_stride + h * head_dim + d] = softmax over visible j <= p0 + t of
// (q . k_j) * scale, applied to v_j, where q = q[t * q_stride + h * head_dim ..],
// k_j = k[j * kv_stride + (h / group) * head_dim ..] and likewise v_j.
// Device pointers; asynchronous on `stream`.
void attention(const float* q, int64_t q_stride, const float* k, const float* v, int64_t kv_stride,
               const AttentionShape& shape, int64_t p0, int64_t n_tokens, float* out, int64_t out_stride,
               const Stream& stream);

}  // namespace kvg::cuda
