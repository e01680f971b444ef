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

// Double-precision helpers for tables computed once (rotary angles). The
// results are rounded to fp32 by the caller.
double exp_f64(double x);
double log_f64(double x);  // x > 0, finite
void sincos_f64(double x, double* s, double* c);  // |x| < 2^20

}  // namespace kvg
