// Causal attention of one query head over the KV cache, in fixed blocks.
//
// Keys are visited in blocks of kAttentionBlock positions aligned to absolute
// positions (block b covers [32b, 32b+32)), with an online softmax merged
// block by block in increasing order (docs/recipe.md). The result for a query
// depends only on the query and the cache contents up to its position — not
// on how many queries run together, how the prompt was chunked, or whether
// the cache was computed here or grafted from an artifact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/cpu/isa.hpp"

namespace kvg {

constexpr int kAttentionBlock = 32;

// How a compact row becomes the floats it stands for (storage/kv_codec.hpp's
// decode_kv_rows, which the engine hands down: kernels know no formats).
using KvRowWidener = void (*)(uint32_t dtype, uint32_t head_dim, const uint8_t* rows, size_t n_rows, float* out);

// Rows of positions [begin, end) held outside the resident cache (a mapped
// artifact link, engine/mapped_kv.hpp). fp32 rows: position p's row starts
// at k + (p - begin) * row_stride, with the layout's row_stride. Compact
// rows (widen set: an artifact of kv_dtype bf16 or i8): the row of position
// p and KV head h starts at k_rows + ((p - begin) * n_head_kv + h) *
// row_bytes, and is widened as it is read into exactly the floats a
// resident cache of that storage holds.
struct KvSegment {
  int64_t begin = 0, end = 0;
  const float* k = nullptr;
  const float* v = nullptr;
  KvRowWidener widen = nullptr;
  uint32_t dtype = 0;
  const uint8_t* k_rows = nullptr;
  const uint8_t* v_rows = nullptr;
  int64_t row_bytes = 0;
  int n_head_kv = 0;
};

struct KvLayout {
  const float* k = nullptr;  // [position][row_stride] from position resident_begin(); this head's slice
  const float* v = nullptr;  // starts at head_offset
  int64_t row_stride = 0;    // floats between consecutive positions
  int64_t head_offset = 0;   // floats from a row's start to this KV head
  // Positions [0, resident_begin()) are read from these segments instead:
  // sorted and contiguous from 0. Empty: every position is resident.
  std::span<const KvSegment> prefix = {};

  int64_t resident_begin() const { return prefix.empty() ? 0 : prefix.back().end; }
};

// One block's keys and values as the kernels read them: key j of the block
// at k + j * stride (this head's slice), value j at v + j * stride.
struct KvBlockRows {
  const float* k;
  const float* v;
  int64_t stride;
};

// Finds a block's rows in a KvLayout, for blocks visited in increasing order.
// A block inside one fp32 segment, or inside the resident rows, is read in
// place; one that straddles a boundary, or lies in a compact segment, has
// this head's slices copied (or widened) into a buffer here. Copying changes
// no value, widening gives the resident cache's values, and the kernels'
// arithmetic is the same either way, so the bits do not depend on where the
// segments end or how they are stored.
class KvBlockCursor {
 public:
  KvBlockCursor(const KvLayout& kv, int head_dim) : kv_(kv), head_dim_(head_dim) {}
  KvBlockCursor(const KvBlockCursor&) = delete;
  KvBlockCursor& operator=(const KvBlockCursor&) = delete;
  // Positions [start, start + n), n <= kAttentionBlock; `start` never decreases.
  KvBlockRows rows(int64_t start, int n);

 private:
  const float* row(const float* resident, int64_t p, bool key);  // this head's slice of p's row (fp32)
  void copy_row(int64_t p, bool key, float* out);               // ... of any row, as floats

  const KvLayout& kv_;
  int head_dim_;
  size_t segment_ = 0;  // the first segment that may hold the next block
  // Straddling or compact blocks only (head_dim <= 512, the kernels' bound);
  // never touched otherwise, so it costs stack address space, not time.
  alignas(64) float spill_k_[kAttentionBlock * 512];
  alignas(64) float spill_v_[kAttentionBlock * 512];
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
