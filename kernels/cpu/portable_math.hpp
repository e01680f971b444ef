// The recipe's own transcendental functions (recipe rule 3: no platform libm
// in the numeric path). Built only from IEEE-exact operations — +, -, *, /,
// sqrt and explicit fma — in a fixed order, so every compiler, CPU and the
// CUDA kernels produce the same bits. Accuracy is a few ulp, which is all a
// transformer needs; reproducibility is the point.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace kvg {

// exp(x) for fp32. Defined outputs: x > 88 -> +inf, x < -86 -> +0, NaN -> NaN.
// Inside: n = round(x * log2 e) by the 1.5 * 2^23 trick, Cody-Waite reduction
// r = x - n ln2 (two explicit fmas), a degree-7 polynomial (Cephes expf
// coefficients) in fma-Horner form, and an exact scaling by 2^n.
inline float exp_f32(float x) {
  if (x != x) return x;
  if (x > 88.0f) return INFINITY;
  if (x < -86.0f) return 0.0f;
  const float shifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (x * 1.44269504088896341f + shifter) - shifter;
  float r = std::fma(n, -0.693359375f, x);
  r = std::fma(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  const float r2 = r * r;
  p = std::fma(p, r2, r);
  p = p + 1.0f;
  const int32_t e = int32_t(n) + 127;  // n in [-125, 127]: a normal power of two
  return p * std::bit_cast<float>(uint32_t(e) << 23);
}

// SiLU as the recipe defines it: x / (1 + exp(-x)).
inline float silu_f32(float x) { return x / (1.0f + exp_f32(-x)); }

// tanh(x) for fp32. |x| < 0.625: x + x * z * P(z), z = x*x, P a degree-4
// polynomial (Cephes tanhf coefficients) in fma-Horner form; otherwise
// 1 - 2 / (exp_f32(2|x|) + 1) with x's sign (exp overflowing to +inf gives
// exactly 1). NaN -> NaN, ±0 -> ±0.
inline float tanh_f32(float x) {
  if (x != x || x == 0.0f) return x;  // NaN, and zeros keep their sign
  const float a = std::fabs(x);
  if (a < 0.625f) {
    const float z = x * x;
    float p = -5.70498872745e-3f;
    p = std::fma(p, z, 2.06390887954e-2f);
    p = std::fma(p, z, -5.37397155531e-2f);
    p = std::fma(p, z, 1.33314422036e-1f);
    p = std::fma(p, z, -3.33332819422e-1f);
    return std::fma(p * z, x, x);
  }
  const float t = 1.0f - 2.0f / (exp_f32(2.0f * a) + 1.0f);
  return x < 0.0f ? -t : t;
}

// GELU, tanh form (gelu_pytorch_tanh, as the gemma family is trained):
// u = (0.7978845608 * x) * (1 + 0.044715 * (x * x));
// gelu(x) = (0.5 * x) * (1 + tanh_f32(u)), each operation rounded.
inline float gelu_tanh_f32(float x) {
  const float u = (0.7978845608f * x) * (1.0f + 0.044715f * (x * x));
  return (0.5f * x) * (1.0f + tanh_f32(u));
}

// Soft-capping: cap * tanh(x * (1 / cap)), with 1 / cap rounded once.
inline float softcap_f32(float x, float cap) { return tanh_f32(x * (1.0f / cap)) * cap; }

// Double-precision helpers for tables computed once (rotary angles). The
// results are rounded to fp32 by the caller.
double exp_f64(double x);
double log_f64(double x);  // x > 0, finite
void sincos_f64(double x, double* s, double* c);  // |x| < 2^20

}  // namespace kvg
