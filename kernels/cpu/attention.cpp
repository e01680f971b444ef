#include "kernels/cpu/attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/portable_math.hpp"

namespace kvg {

namespace detail {
void attention_head_avx512(const float* q, const KvLayout& kv, int head_dim, int64_t position, float scale,
                           float* out, const AttentionExtras& extras);
}  // namespace detail

const float* KvBlockCursor::row(const float* resident, int64_t p, bool key) {
  const int64_t resident_begin = kv_.resident_begin();
  if (p >= resident_begin) return resident + (p - resident_begin) * kv_.row_stride + kv_.head_offset;
  while (kv_.prefix[segment_].end <= p) ++segment_;
  const KvSegment& s = kv_.prefix[segment_];
  return (key ? s.k : s.v) + (p - s.begin) * kv_.row_stride + kv_.head_offset;
}

void KvBlockCursor::copy_row(int64_t p, bool key, float* out) {
  if (p < kv_.resident_begin()) {
    while (kv_.prefix[segment_].end <= p) ++segment_;
    const KvSegment& s = kv_.prefix[segment_];
    if (s.widen) {
      const int64_t head = kv_.head_offset / head_dim_;
      const uint8_t* rows = key ? s.k_rows : s.v_rows;
      s.widen(s.dtype, uint32_t(head_dim_), rows + ((p - s.begin) * s.n_head_kv + head) * s.row_bytes, 1, out);
      return;
    }
  }
  std::memcpy(out, row(key ? kv_.k : kv_.v, p, key), size_t(head_dim_) * sizeof(float));
}

KvBlockRows KvBlockCursor::rows(int64_t start, int n) {
  const int64_t resident_begin = kv_.resident_begin();
  const int64_t last = start + n - 1;
  if (start >= resident_begin) return {row(kv_.k, start, true), row(kv_.v, start, false), kv_.row_stride};
  while (kv_.prefix[segment_].end <= start) ++segment_;
  if (last < kv_.prefix[segment_].end && !kv_.prefix[segment_].widen)
    return {row(kv_.k, start, true), row(kv_.v, start, false), kv_.row_stride};
  // Straddles a boundary, or compact: gather this head's slices, position by position.
  const size_t at = segment_;
  for (int j = 0; j < n; ++j) copy_row(start + j, true, spill_k_ + j * head_dim_);
  segment_ = at;  // copy_row() moved it on; walk the same segments again for the values
  for (int j = 0; j < n; ++j) copy_row(start + j, false, spill_v_ + j * head_dim_);
  return {spill_k_, spill_v_, head_dim_};
}

void attention_head(const float* q, const KvLayout& kv, int head_dim, int64_t position, float scale,
                    float* out, Isa isa, const AttentionExtras& extras) {
  if (isa == Isa::Avx512) return detail::attention_head_avx512(q, kv, head_dim, position, scale, out, extras);
  float scores[kAttentionBlock];
  // Per-block sums first, then merged into the running state: the same two
  // roundings whatever the block's length.
  float block_acc[512];
  float acc[512];
  std::fill(acc, acc + head_dim, 0.0f);
  float running_max = -INFINITY;
  float running_sum = 0.0f;

  KvBlockCursor cursor(kv, head_dim);
  const int64_t lo = first_visible(position, extras.window);
  for (int64_t block = lo - lo % kAttentionBlock; block <= position; block += kAttentionBlock) {
    const int64_t start = std::max(block, lo);  // inside the edge block of a window
    const int64_t end = std::min<int64_t>(block + kAttentionBlock, position + 1);
    const int n = int(end - start);
    const KvBlockRows rows = cursor.rows(start, n);
    float block_max = -INFINITY;
    for (int j = 0; j < n; ++j) {
      const float* key = rows.k + j * rows.stride;
      scores[j] = dot_f32(q, key, head_dim, isa) * scale;
      if (extras.softcap > 0.0f) scores[j] = softcap_f32(scores[j], extras.softcap);
      block_max = std::max(block_max, scores[j]);
    }
    const float new_max = std::max(running_max, block_max);
    const float alpha = exp_f32(running_max - new_max);  // exp(-inf) = 0 on the first block
    float block_sum = 0.0f;
    std::fill(block_acc, block_acc + head_dim, 0.0f);
    for (int j = 0; j < n; ++j) {
      const float p = exp_f32(scores[j] - new_max);
      block_sum = block_sum + p;
      const float* value = rows.v + j * rows.stride;
      for (int d = 0; d < head_dim; ++d) block_acc[d] = block_acc[d] + p * value[d];
    }
    running_sum = running_sum * alpha + block_sum;
    for (int d = 0; d < head_dim; ++d) acc[d] = acc[d] * alpha + block_acc[d];
    running_max = new_max;
  }
  for (int d = 0; d < head_dim; ++d) out[d] = acc[d] / running_sum;
}

}  // namespace kvg
