#include "kernels/cpu/portable_math.hpp"

namespace kvg {

namespace {

constexpr double kLn2Hi = 6.93147180369123816490e-01;  // upper bits of ln 2: n * kLn2Hi is exact
constexpr double kLn2Lo = 1.90821492927058770002e-10;
constexpr double kShifter = 6755399441055744.0;         // 1.5 * 2^52: rounds to an integer

double round_to_int(double x) { return (x + kShifter) - kShifter; }

double pow2(int n) {  // 2^n for n in the normal range
  return std::bit_cast<double>(uint64_t(int64_t(n) + 1023) << 52);
}

}  // namespace

double exp_f64(double x) {
  if (x > 709.0) return INFINITY;
  if (x < -708.0) return 0.0;
  const double n = round_to_int(x * 1.4426950408889634);
  const double r = (x - n * kLn2Hi) - n * kLn2Lo;  // |r| <= ~0.347
  // Taylor series to r^16: the tail is below 2^-60 relative.
  double term = 1.0, sum = 1.0;
  for (int k = 1; k <= 16; ++k) {
    term = term * r / double(k);
    sum = sum + term;
  }
  return sum * pow2(int(n));
}

double log_f64(double x) {
  // x = m * 2^e with m in [sqrt(1/2), sqrt(2)); log m = 2 atanh((m-1)/(m+1)).
  uint64_t bits = std::bit_cast<uint64_t>(x);
  int e = int((bits >> 52) & 0x7ff) - 1023;
  bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
  double m = std::bit_cast<double>(bits);
  if (m > 1.4142135623730951) {
    m = m / 2.0;
    e += 1;
  }
  const double f = (m - 1.0) / (m + 1.0);  // |f| <= 0.1716
  const double f2 = f * f;
  double power = f, sum = 0.0;
  for (int k = 1; k <= 41; k += 2) {  // f^43 / 43 is below 2^-110
    sum = sum + power / double(k);
    power = power * f2;
  }
  return double(e) * kLn2Hi + (double(e) * kLn2Lo + 2.0 * sum);
}

void sincos_f64(double x, double* s, double* c) {
  // Cody-Waite reduction by pi/2 in three parts (each exact when multiplied by
  // a quotient below 2^20), then Taylor series on |r| <= pi/4.
  constexpr double kPio2_1 = 1.57079632673412561417e+00;
  constexpr double kPio2_2 = 6.07710050630396597660e-11;
  constexpr double kPio2_3 = 2.02226624879595063154e-21;  // pi/2 - kPio2_1 - kPio2_2
  const double q = round_to_int(x * 0.63661977236758134308);
  const double r = ((x - q * kPio2_1) - q * kPio2_2) - q * kPio2_3;
  const double r2 = r * r;
  double term_s = r, sum_s = r, term_c = 1.0, sum_c = 1.0;
  for (int k = 1; k <= 11; ++k) {  // (pi/4)^23 / 23! is below 2^-80
    term_s = -term_s * r2 / double((2 * k) * (2 * k + 1));
    sum_s = sum_s + term_s;
    term_c = -term_c * r2 / double((2 * k - 1) * (2 * k));
    sum_c = sum_c + term_c;
  }
  const int quadrant = int(int64_t(q) & 3);
  switch (quadrant) {
    case 0: *s = sum_s; *c = sum_c; break;
    case 1: *s = sum_c; *c = -sum_s; break;
    case 2: *s = -sum_s; *c = -sum_c; break;
    default: *s = -sum_c; *c = sum_s; break;
  }
}

}  // namespace kvg
