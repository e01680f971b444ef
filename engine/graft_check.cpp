#include "engine/graft_check.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <chrono>
#include <cmath>
#include <cstring>

#include "common/error.hpp"
#include "engine/sampler.hpp"

namespace kvg {

namespace {

static_assert(std::endian::native == std::endian::little, "logits hashes are over little-endian bytes");

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Sampled continuation from a session holding the prompt, whose last logits
// row is `last`; the session is truncated back afterwards.
std::vector<int32_t> continuation(Session& session, std::vector<float> last, const SamplingParams& params, int n,
                                  const ProgressCheck& check) {
  const int64_t keep = session.n_past();
  const size_t n_vocab = size_t(session.model().config().n_vocab);
  std::vector<int32_t> out;
  for (int i = 0; i < n && session.n_past() < session.max_context(); ++i) {
    if (check) check();
    const int32_t token = sample_token(std::span<const float>(last.data(), n_vocab), params, session.n_past());
    out.push_back(token);
    const int32_t one[1] = {token};
    session.forward(one, LogitsFor::Last, &last);
  }
  session.truncate(keep);
  return out;
}

}  // namespace

double kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits) {
  auto log_softmax = [](std::span<const float> row) {
    double max = -INFINITY;
    for (float v : row) max = std::max(max, double(v));
    double total = 0;
    for (float v : row) total += std::exp(double(v) - max);
    std::vector<double> out(row.size());
    for (size_t i = 0; i < row.size(); ++i) out[i] = double(row[i]) - max - std::log(total);
    return out;
  };
  const auto lp = log_softmax(p_logits), lq = log_softmax(q_logits);
  double kl = 0;
  for (size_t i = 0; i < lp.size(); ++i) kl += std::exp(lp[i]) * (lp[i] - lq[i]);
  return std::max(0.0, kl);
}

std::string logits_sha256(std::span<const float> logits) {
  return to_hex(sha256(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(logits.data()), logits.size_bytes())));
}

GraftCheckResult graft_check(std::shared_ptr<const Model> model, const EngineOptions& engine, const Digest& artifact,
                             const ArtifactOpener& open, std::span<const int32_t> prompt,
                             const GraftCheckOptions& options, const ProgressCheck& check) {
  GraftCheckResult r;
  const size_t n_vocab = size_t(model->config().n_vocab);

  auto start = std::chrono::steady_clock::now();
  Session grafted(model, engine);
  r.grafted_tokens = graft(grafted, artifact, open, prompt).n_tokens;
  const auto rest = prompt.subspan(size_t(r.grafted_tokens));
  if (rest.empty())
    throw Error(ErrorCode::InvalidArgument, "the prompt ends where the artifact ends: give at least one token after "
                                            "the artifact's " + std::to_string(r.grafted_tokens) + " to compare");
  std::vector<float> graft_logits;
  grafted.prefill(rest, 0, LogitsFor::All, &graft_logits, check);
  r.graft_seconds = seconds_since(start);

  start = std::chrono::steady_clock::now();
  Session monolithic(model, engine);
  if (check) check();
  std::vector<float> all_logits;
  monolithic.forward(prompt, LogitsFor::All, &all_logits);  // one pass over the whole prompt
  r.recompute_seconds = seconds_since(start);
  const std::span<const float> recompute_logits(all_logits.data() + size_t(r.grafted_tokens) * n_vocab,
                                                rest.size() * n_vocab);

  r.positions = int64_t(rest.size());
  r.graft_logits_sha256 = logits_sha256(graft_logits);
  r.recompute_logits_sha256 = logits_sha256(recompute_logits);
  // A non-finite logit makes every comparison meaningless (NaN compares
  // unequal to itself, and a KL over it is NaN, which std::max would drop):
  // such a check reports KL NaN and is never exact.
  const auto all_finite = [](std::span<const float> v) {
    return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
  };
  const bool finite = all_finite(graft_logits) && all_finite(recompute_logits);
  int64_t agree = 0;
  for (size_t p = 0; p < rest.size(); ++p) {
    const std::span<const float> g(graft_logits.data() + p * n_vocab, n_vocab);
    const std::span<const float> m(recompute_logits.data() + p * n_vocab, n_vocab);
    r.kl_max = std::max(r.kl_max, kl_divergence(m, g));
    agree += argmax(g) == argmax(m);
  }
  r.argmax_agreement = double(agree) / double(rest.size());
  if (!finite) r.kl_max = std::numeric_limits<double>::quiet_NaN();
  const bool bytes_equal = graft_logits.size() == recompute_logits.size() &&
                           std::memcmp(graft_logits.data(), recompute_logits.data(), recompute_logits.size_bytes()) == 0;

  const std::vector<float> graft_last(graft_logits.end() - std::ptrdiff_t(n_vocab), graft_logits.end());
  const std::vector<float> recompute_last(all_logits.end() - std::ptrdiff_t(n_vocab), all_logits.end());
  for (int s = 0; s < options.samples; ++s) {
    SamplingParams params;
    params.temperature = options.temperature;
    params.seed = uint64_t(s);
    const auto a = continuation(grafted, graft_last, params, options.sample_tokens, check);
    const auto b = continuation(monolithic, recompute_last, params, options.sample_tokens, check);
    ++r.samples;
    r.samples_equal += a == b;
  }
  r.exact = finite && bytes_equal && r.samples_equal == r.samples;
  return r;
}

}  // namespace kvg
