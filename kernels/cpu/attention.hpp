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

// What some architectures add to plain causal attention.
struct AttentionExtras {
  // > 0: only keys j > position - window are visited (sliding window). The
  // blocks stay aligned to absolute positions: the first visited block is
  // the one holding position - window + 1, entered at that position.
  int64_t window = 0;
  // > 0: each score becomes softcap_f32(score, softcap) before the softmax.
  float softcap = 0.0f;
};

// out[0..head_dim) = softmax(q . k_j * scale over visible j <= position) . v_j.
void attention_head(const float* q, const KvLayout& kv, int head_dim, int64_t position, float scale,
                    float* out, Isa isa, const AttentionExtras& extras = {});

// The first key position a query at `position` sees.
inline int64_t first_visible(int64_t position, int64_t window) {
  return window > 0 && position - window + 1 > 0 ? position - window + 1 : 0;
}

}  // namespace kvg
