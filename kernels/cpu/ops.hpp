// Element-wise and per-row operations of the recipe (docs/recipe.md). Each
// output element is computed by one fixed sequence of IEEE operations.
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.hpp"

namespace kvg {

// y = (x * (1 / sqrt(dot(x, x) / n + eps))) * w, element by element.
void rmsnorm(const float* x, const float* w, int64_t n, float eps, float* y, Isa isa);

// LayerNorm: mean = sum(x) / n, the sum in the dot product's 16-lane order
// (as dot(x, 1)); d[i] = x[i] - mean; var = dot(d, d) / n;
// inv = 1 / sqrt(var + eps); y[i] = (d[i] * inv) * w[i] + b[i] (y holds d
// meanwhile, so y must not alias x).
void layernorm(const float* x, const float* w, const float* b, int64_t n, float eps, float* y, Isa isa);

// x[i] = gelu_tanh(x[i]).
void gelu_inplace(float* x, int64_t n);

enum class RopeStyle {
  AdjacentPairs,  // (x[2i], x[2i+1]) rotate together: llama ("NORM" mode)
  SplitHalves,    // (x[i], x[i + rope_dim/2]): GPT-NeoX / qwen2 style
};

// Rotates the first rope_dim features of each of n_heads heads (head_dim
// apart) by the angles whose cosines and sines are given (rope_dim/2 each):
// a' = a*c - b*s, b' = a*s + b*c, each product rounded.
void apply_rope(float* x, int n_heads, int head_dim, int rope_dim, const float* cos, const float* sin,
                RopeStyle style);

// out[i] = silu(gate[i]) * up[i] (out may be gate); the same bits on every ISA.
void swiglu(const float* gate, const float* up, float* out, int64_t n, Isa isa = Isa::Scalar);
namespace detail {
void swiglu_avx512(const float* gate, const float* up, float* out, int64_t n);
}

// out[i] = gelu_tanh(gate[i]) * up[i] (kernels/cpu/portable_math.hpp).
void geglu(const float* gate, const float* up, float* out, int64_t n);

// x[i] = x[i] * s.
void scale_inplace(float* x, float s, int64_t n);

// x[i] = softcap_f32(x[i], cap).
void softcap_inplace(float* x, float cap, int64_t n);

// x[i] += delta[i].
void add_inplace(float* x, const float* delta, int64_t n);

}  // namespace kvg
