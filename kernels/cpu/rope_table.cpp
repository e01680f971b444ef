#include "kernels/cpu/rope_table.hpp"

#include "kernels/cpu/portable_math.hpp"

namespace kvg {

RopeTable::RopeTable(int rope_dim, double base, std::span<const float> factors, double freq_scale) {
  const double log_base = log_f64(base);
  for (int i = 0; i < rope_dim / 2; ++i) {
    double f = exp_f64(-(double(2 * i) / double(rope_dim)) * log_base);
    if (freq_scale != 1.0) f = f * freq_scale;
    if (!factors.empty()) f = f / double(factors[size_t(i)]);
    inv_freq_.push_back(f);
  }
}

void RopeTable::angles(int64_t position, float* cos_out, float* sin_out) const {
  for (int i = 0; i < pairs(); ++i) {
    double s, c;
    sincos_f64(double(position) * inv_freq_[size_t(i)], &s, &c);
    cos_out[i] = float(c);
    sin_out[i] = float(s);
  }
}

}  // namespace kvg
