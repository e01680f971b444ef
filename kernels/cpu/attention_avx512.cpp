// AVX-512 attention_head: 16 keys' scores at a time (one key per lane, the
// recipe's 16 dot-product lanes unrolled as 16 registers), vector exp, and
// value accumulation across the head dimension. Every lane performs exactly
// the scalar definition's operations (kernels/cpu/attention.cpp).
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/exp_avx512.hpp"
#include "kernels/cpu/portable_math.hpp"

namespace kvg::detail {

namespace {

// Scores of the n (<= 16) keys at base + i * stride into out[0..16).
void scores16(const float* q, const float* base, int64_t stride, int head_dim, int n, float scale, float* out) {
  const __mmask16 valid = __mmask16((1u << n) - 1);
  const __m512i offsets = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                             _mm512_set1_epi32(int(stride)));
  __m512 lane[16];
  for (int i = 0; i < 16; ++i) lane[i] = _mm512_setzero_ps();
  for (int k = 0; k < head_dim; ++k) {
    const __m512 key = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), valid, offsets, base + k, 4);
    lane[k % 16] = _mm512_fmadd_ps(_mm512_set1_ps(q[k]), key, lane[k % 16]);
  }
  for (int i = 0; i < 8; ++i) lane[i] = _mm512_add_ps(lane[i], lane[i + 8]);
  for (int i = 0; i < 4; ++i) lane[i] = _mm512_add_ps(lane[i], lane[i + 4]);
  for (int i = 0; i < 2; ++i) lane[i] = _mm512_add_ps(lane[i], lane[i + 2]);
  _mm512_storeu_ps(out, _mm512_mul_ps(_mm512_add_ps(lane[0], lane[1]), _mm512_set1_ps(scale)));
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
  for (int64_t block = lo - lo % kAttentionBlock; block <= position; block += kAttentionBlock) {
    const int64_t start = std::max(block, lo);  // inside the edge block of a window
    const int n = int(std::min<int64_t>(block + kAttentionBlock, position + 1) - start);
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
    for (int c = 0; c < chunks; ++c) {
      const __mmask16 m = mask_of(c);
      __m512 ab = _mm512_setzero_ps();
      for (int j = 0; j < n; ++j) {
        const float* value = rows.v + j * rows.stride + 16 * c;
        ab = _mm512_add_ps(ab, _mm512_mul_ps(_mm512_set1_ps(probs[j]), _mm512_maskz_loadu_ps(m, value)));
      }
      _mm512_mask_storeu_ps(block_acc + 16 * c, m, ab);
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
