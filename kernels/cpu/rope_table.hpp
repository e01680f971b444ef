// Rotary-embedding angles, computed in double precision with the recipe's own
// math and rounded once to fp32, so CPU and GPU use identical tables.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kvg {

class RopeTable {
 public:
  // freq_i = (base^(-2i / rope_dim) * freq_scale) / factors[i] for
  // i < rope_dim / 2 (factors empty: all 1), in binary64.
  RopeTable(int rope_dim, double base, std::span<const float> factors = {}, double freq_scale = 1.0);
  int pairs() const { return int(inv_freq_.size()); }
  // cos/sin of position * freq_i, rope_dim/2 values each.
  void angles(int64_t position, float* cos_out, float* sin_out) const;

 private:
  std::vector<double> inv_freq_;
};

}  // namespace kvg
