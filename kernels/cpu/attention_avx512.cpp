// AVX-512 attention_head: 16 keys' scores at a time (a register of the
// recipe's 16 dot-product lanes per key, reduced together), vector exp, and
// value accumulation across the head dimension. Every lane performs exactly
// the scalar definition's operations (kernels/cpu/attention.cpp).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/exp_avx512.hpp"
#include "kernels/cpu/portable_math.hpp"

namespace kvg::detail {

namespace {

// Sixteen keys' lane registers reduced at once. Each step adds, for every
// key, the pairs that reduce() in matmul_avx512.cpp adds for one (the lower
// lane first), and packs two registers' keys into one register.

// a, b: one key's 16 lanes each -> [a: i + (i+8)] [b: i + (i+8)], i < 8.
inline __m512 keys2(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
}
// a, b: two keys' 8 lanes each -> a quarter per key (keys of a, then b): i + (i+4), i < 4.
inline __m512 keys4(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xDD));
}
// a, b: four keys' 4 lanes each (quarter k) -> quarter k: [a's key k: i + (i+2), i < 2; b's key k: the same].
inline __m512 keys8(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
}
// a, b: eight keys' 2 lanes each -> lane 4k + m holds key 4m + k's 0 + 1.
inline __m512 keys16(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Scores of the n (<= 16) keys at base + i * stride into out[0..16). Each
// key's 16 dot-product lanes are a register (q's chunk times the key's,
// accumulated as dot_avx512 does, a masked tail included); the 16 registers
// are then reduced together, transposed as they go, so every key's tree of
// additions is the recipe's. Keys >= n load nothing (masked off) and score 0.
void scores16(const float* q, const float* base, int64_t stride, int head_dim, int n, float scale, float* out) {
  __m512 lane[16];  // unrolled, so the sixteen stay in registers
  #pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) lane[i] = _mm512_setzero_ps();
  for (int k = 0; k < head_dim; k += 16) {
    const __mmask16 m = head_dim - k >= 16 ? __mmask16(0xffff) : __mmask16((1u << (head_dim - k)) - 1);
    const __m512 qk = _mm512_maskz_loadu_ps(m, q + k);
    #pragma GCC unroll 16
    for (int i = 0; i < 16; ++i)
      lane[i] = _mm512_fmadd_ps(qk, _mm512_maskz_loadu_ps(i < n ? m : __mmask16(0), base + i * stride + k), lane[i]);
  }
  __m512 two[8], four[4], eight[2];
  for (int i = 0; i < 8; ++i) two[i] = keys2(lane[2 * i], lane[2 * i + 1]);
  for (int i = 0; i < 4; ++i) four[i] = keys4(two[2 * i], two[2 * i + 1]);
  for (int i = 0; i < 2; ++i) eight[i] = keys8(four[2 * i], four[2 * i + 1]);
  // Key j sits in lane 4 (j % 4) + j / 4: back to key order.
  const __m512i key_order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m512 sums = _mm512_permutexvar_ps(key_order, keys16(eight[0], eight[1]));
  _mm512_storeu_ps(out, _mm512_mul_ps(sums, _mm512_set1_ps(scale)));
}

// Asks for this head's slices of the keys and values of positions [start,
// start + n) when they are resident fp32 rows (the common case: a segment's
// rows are left to the reads). Rows sit a whole cache row apart (every KV
// head's slice), a stride the hardware prefetchers follow poorly, and the
// weights streamed between layers have evicted them: without this, the key
// loads waited on memory for most of a decode pass's attention.
void prefetch_block(const KvLayout& kv, int head_dim, int64_t start, int n) {
  const int64_t resident_begin = kv.resident_begin();
  if (start < resident_begin) return;
  const int64_t bytes = int64_t(head_dim) * int64_t(sizeof(float));
  const int64_t at = (start - resident_begin) * kv.row_stride + kv.head_offset;
  for (int j = 0; j < n; ++j)
    for (int64_t line = 0; line < bytes; line += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(kv.k + at + j * kv.row_stride) + line, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(kv.v + at + j * kv.row_stride) + line, _MM_HINT_T0);
    }
}

}  // namespace

void attention_head_avx512(const float* q, const KvLayout& kv, int head_dim, int64_t position, float scale,
                           float* out, const AttentionExtras& extras) {
  alignas(64) float scores[kAttentionBlock];
  alignas(64) float probs[kAttentionBlock];
  alignas(64) float block_acc[512];
  alignas(64) float acc[512];
  std::fill(acc, acc + head_dim, 0.0f);
  float running_max = -INFINITY;
  float running_sum = 0.0f;
  const int chunks = (head_dim + 15) / 16;
  auto mask_of = [&](int c) { return __mmask16(head_dim - 16 * c >= 16 ? 0xffff : (1u << (head_dim - 16 * c)) - 1); };

  KvBlockCursor cursor(kv, head_dim);
  const int64_t lo = first_visible(position, extras.window);
  const auto visible = [&](int64_t block) {  // [start, start + n) of the block that begins at `block`
    const int64_t start = std::max(block, lo);  // inside the edge block of a window
    return std::pair{start, int(std::min<int64_t>(block + kAttentionBlock, position + 1) - start)};
  };
  const int64_t first_block = lo - lo % kAttentionBlock;
  prefetch_block(kv, head_dim, visible(first_block).first, visible(first_block).second);
  for (int64_t block = first_block; block <= position; block += kAttentionBlock) {
    const auto [start, n] = visible(block);
    if (block + kAttentionBlock <= position) {
      const auto [next_start, next_n] = visible(block + kAttentionBlock);
      prefetch_block(kv, head_dim, next_start, next_n);
    }
    const KvBlockRows rows = cursor.rows(start, n);
    for (int j = 0; j < n; j += 16)
      scores16(q, rows.k + j * rows.stride, rows.stride, head_dim, std::min(16, n - j), scale, scores + j);
    if (extras.softcap > 0.0f)  // the scalar definition, element by element
      for (int j = 0; j < n; ++j) scores[j] = softcap_f32(scores[j], extras.softcap);
    float block_max = -INFINITY;
    for (int j = 0; j < n; ++j) block_max = std::max(block_max, scores[j]);
    const float new_max = std::max(running_max, block_max);
    const float alpha = exp_f32(running_max - new_max);
    for (int j = 0; j < n; j += 16)
      _mm512_storeu_ps(probs + j, exp_f32_avx512(_mm512_sub_ps(_mm512_loadu_ps(scores + j), _mm512_set1_ps(new_max))));
    float block_sum = 0.0f;
    for (int j = 0; j < n; ++j) block_sum = block_sum + probs[j];
    // Four chunks' sums side by side: each is its own chain of additions in
    // key order (the recipe's), and four chains keep the adder busy.
    for (int c0 = 0; c0 < chunks; c0 += 4) {
      __mmask16 m[4];
      int at[4];  // a chunk past the head's end loads nothing, from the last one's place
      __m512 ab[4];
      #pragma GCC unroll 4
      for (int u = 0; u < 4; ++u) {
        m[u] = c0 + u < chunks ? mask_of(c0 + u) : __mmask16(0);
        at[u] = 16 * std::min(c0 + u, chunks - 1);
        ab[u] = _mm512_setzero_ps();
      }
      for (int j = 0; j < n; ++j) {
        const float* value = rows.v + j * rows.stride;
        const __m512 p = _mm512_set1_ps(probs[j]);
        #pragma GCC unroll 4
        for (int u = 0; u < 4; ++u)
          ab[u] = _mm512_add_ps(ab[u], _mm512_mul_ps(p, _mm512_maskz_loadu_ps(m[u], value + at[u])));
      }
      #pragma GCC unroll 4
      for (int u = 0; u < 4; ++u) _mm512_mask_storeu_ps(block_acc + 16 * (c0 + u), m[u], ab[u]);
    }
    running_sum = running_sum * alpha + block_sum;
    for (int c = 0; c < chunks; ++c) {
      const __mmask16 m = mask_of(c);
      const __m512 a = _mm512_maskz_loadu_ps(m, acc + 16 * c);
      const __m512 b = _mm512_maskz_loadu_ps(m, block_acc + 16 * c);
      _mm512_mask_storeu_ps(acc + 16 * c, m, _mm512_add_ps(_mm512_mul_ps(a, _mm512_set1_ps(alpha)), b));
    }
    running_max = new_max;
  }
  for (int d = 0; d < head_dim; ++d) out[d] = acc[d] / running_sum;
}

}  // namespace kvg::detail
