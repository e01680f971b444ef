#include "kernels/cpu/ops.hpp"

#include <cmath>

#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/portable_math.hpp"

namespace kvg {

void rmsnorm(const float* x, const float* w, int64_t n, float eps, float* y, Isa isa) {
  const float mean_square = dot_f32(x, x, n, isa) / float(n);
  const float inv = 1.0f / std::sqrt(mean_square + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * inv) * w[i];
}

void layernorm(const float* x, const float* w, const float* b, int64_t n, float eps, float* y, Isa isa) {
  float lanes[16] = {};
  for (int64_t i = 0; i < n; ++i) lanes[i % 16] = lanes[i % 16] + x[i];  // fma(x, 1, acc): the same rounding
  for (int i = 0; i < 8; ++i) lanes[i] = lanes[i] + lanes[i + 8];
  for (int i = 0; i < 4; ++i) lanes[i] = lanes[i] + lanes[i + 4];
  for (int i = 0; i < 2; ++i) lanes[i] = lanes[i] + lanes[i + 2];
  const float mean = (lanes[0] + lanes[1]) / float(n);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] - mean;
  const float variance = dot_f32(y, y, n, isa) / float(n);
  const float inv = 1.0f / std::sqrt(variance + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = (y[i] * inv) * w[i] + b[i];
}

void gelu_inplace(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = gelu_tanh_f32(x[i]);
}

void apply_rope(float* x, int n_heads, int head_dim, int rope_dim, const float* cos, const float* sin,
                RopeStyle style) {
  const int half = rope_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* head = x + int64_t(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      float* a = style == RopeStyle::AdjacentPairs ? head + 2 * i : head + i;
      float* b = style == RopeStyle::AdjacentPairs ? head + 2 * i + 1 : head + i + half;
      const float av = *a, bv = *b;
      *a = av * cos[i] - bv * sin[i];
      *b = av * sin[i] + bv * cos[i];
    }
  }
}

void swiglu(const float* gate, const float* up, float* out, int64_t n, Isa isa) {
  if (isa == Isa::Avx512) return detail::swiglu_avx512(gate, up, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = silu_f32(gate[i]) * up[i];
}

void geglu(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_tanh_f32(gate[i]) * up[i];
}

void scale_inplace(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] * s;
}

void softcap_inplace(float* x, float cap, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = softcap_f32(x[i], cap);
}

void add_inplace(float* x, const float* delta, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] + delta[i];
}

}  // namespace kvg
