// The compact KV storages' rounding on the GPU: the same integer operations
// as the CPU (kernels/kv_rounding.hpp, shared verbatim), applied to the new
// K or V rows in the device KV mirror before attention reads them.
#pragma once

#include <cstdint>

#include "kernels/cpu/kv_rounding.hpp"
#include "kernels/cuda/device_memory.hpp"

namespace kvg::cuda {

// Rounds n_heads rows of head_dim floats (head_dim apart) in each of n_tokens
// token rows (row_stride floats apart), in place. Nothing for None.
void round_kv_rows(KvRowRounding rounding, float* x, int64_t n_tokens, int64_t row_stride, int n_heads, int head_dim,
                   const Stream& stream);

}  // namespace kvg::cuda
