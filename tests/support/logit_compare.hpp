// Comparing two logit rows as distributions, in double: what the fidelity
// tests (test_fidelity.cpp against fp64, test_kv_fidelity.cpp against fp32 KV)
// report. Numbers, not bits: the bitwise tests are elsewhere.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace kvg::test {

// log-softmax of one row of n logits (float or double).
template <typename T>
std::vector<double> log_softmax(const T* row, int n) {
  double top = double(row[0]);
  for (int i = 1; i < n; ++i) top = std::max(top, double(row[i]));
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(double(row[i]) - top);
  std::vector<double> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out[size_t(i)] = double(row[i]) - top - std::log(sum);
  return out;
}

// KL(p || q) in nats, from two log-softmax rows.
inline double kl_divergence(const std::vector<double>& log_p, const std::vector<double>& log_q) {
  double kl = 0;
  for (size_t i = 0; i < log_p.size(); ++i) kl += std::exp(log_p[i]) * (log_p[i] - log_q[i]);
  return kl;
}

}  // namespace kvg::test
