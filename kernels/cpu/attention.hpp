// Causal attention of one query head over the KV cache, in fixed blocks.
//
// Keys are visited in blocks of kAttentionBlock positions aligned to absolute
// positions (block b covers [32b, 32b+32)), with an online softmax merged
// block by block in increasing order (docs/recipe.md). The result for a query
// depends only on the query and the cache contents up to its position — not
// on how many queries run together, how the prompt was chunked, or whether
// the cache was computed here or grafted from an artifact.
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.hpp"

namespace kvg {

constexpr int kAttentionBlock = 32;

struct KvLayout {
  const float* k = nullptr;  // [position][row_stride]; this head's slice starts at head_offset
  const float* v = nullptr;
  int64_t row_stride = 0;    // floats between consecutive positions
  int64_t head_offset = 0;   // floats from a row's start to this KV head
};

// out[0..head_dim) = softmax(q . k_j * scale over j <= position) . v_j.
void attention_head(const float* q, const KvLayout& kv, int head_dim, int64_t position, float scale,
                    float* out, Isa isa);

}  // namespace kvg
