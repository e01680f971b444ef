#include "engine/sampler.hpp"

#include <algorithm>
#include <numeric>
#include <vector>

#include "common/error.hpp"
#include "engine/request_limits.hpp"
#include "kernels/cpu/portable_math.hpp"

namespace kvg {

int32_t argmax(std::span<const float> logits) {
  if (logits.empty()) throw Error(ErrorCode::InvalidArgument, "argmax of empty logits");
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;
  return int32_t(best);
}

float uniform_for_position(uint64_t seed, int64_t position) {
  // splitmix64 finaliser over a (seed, position) counter: stateless, so the
  // draw for a position never depends on how many draws came before it.
  uint64_t z = seed ^ (uint64_t(position) * 0x9e3779b97f4a7c15ull);
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return float(z >> 40) * 0x1.0p-24f;
}

int32_t sample_token(std::span<const float> logits, const SamplingParams& params, int64_t position) {
  if (!(params.temperature > 0.0f)) return argmax(logits);
  check_top_p(params.top_p, "top_p");
  // Candidates by descending logit, ties by ascending id: a total order.
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t keep = params.top_k > 0 ? std::min(order.size(), size_t(params.top_k)) : order.size();
  auto before = [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b); };
  std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(keep), order.end(), before);
  order.resize(keep);

  const float max_logit = logits[size_t(order[0])];
  std::vector<float> weight(keep);
  float total = 0.0f;
  for (size_t i = 0; i < keep; ++i) {
    weight[i] = exp_f32((logits[size_t(order[i])] - max_logit) / params.temperature);
    total = total + weight[i];
  }
  if (params.top_p < 1.0f) {  // smallest prefix whose mass reaches top_p
    const float limit = params.top_p * total;
    float mass = 0.0f;
    size_t n = 0;
    while (n < keep) {
      mass = mass + weight[n++];
      if (mass >= limit) break;
    }
    weight.resize(n);
    order.resize(n);
    total = mass;
  }
  const float target = uniform_for_position(params.seed, position) * total;
  float mass = 0.0f;
  for (size_t i = 0; i < weight.size(); ++i) {
    mass = mass + weight[i];
    if (target < mass) return order[i];
  }
  return order.back();
}

}  // namespace kvg
