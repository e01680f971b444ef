// Rounds K and V rows to what a compact KV storage holds, in place, as the
// forward pass writes them into the cache (kernels/kv_rounding.hpp has the
// arithmetic; kernels/cuda/kv_rounding.cu the same on the GPU).
#pragma once

#include <cstdint>

namespace kvg {

enum class KvRowRounding {
  None,  // f32 storage: rows kept as computed
  Bf16,  // bfloat16, round to nearest even
  I8,    // int8 with one power-of-two scale per row
};

// n_rows rows of head_dim floats each, contiguous (one row is one KV head of
// one token: its K or its V).
void round_kv_rows(KvRowRounding rounding, float* rows, int64_t n_rows, int head_dim);

}  // namespace kvg
