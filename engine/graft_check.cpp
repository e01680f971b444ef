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

// One side of a check: its generation's rows and tokens, and its time.
struct Side {
  std::vector<float> rows;
  GenerateResult result;
};

// `index`: 0 for the graft's, 1 for the recompute's.
Side run_side(int index, Session& session, std::span<const int32_t> rest, const GraftCheckOptions& options,
              int64_t grafted_tokens, const ProgressCheck& check) {
  Side side;
  GenerateOptions generation = graft_check_generation(options, grafted_tokens);
  generation.prefill_report = options.prefill_reports[size_t(index)];
  generation.decode_report = options.decode_reports[size_t(index)];
  generation.prompt_logits = [&side](std::span<const float> rows) {
    side.rows.insert(side.rows.end(), rows.begin(), rows.end());
  };
  generation.check = check;
  side.result = generate(session, rest, generation);
  return side;
}

bool all_finite(std::span<const float> v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
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

void require_positions_to_compare(int64_t grafted_tokens, size_t prompt_tokens) {
  if (int64_t(prompt_tokens) <= grafted_tokens)
    throw Error(ErrorCode::InvalidArgument, "the prompt ends where the artifact ends: give at least one token after "
                                            "the artifact's " + std::to_string(grafted_tokens) + " to compare");
}

GenerateOptions graft_check_generation(const GraftCheckOptions& options, int64_t grafted_tokens) {
  GenerateOptions generation;
  generation.max_new_tokens = options.samples > 0 ? options.sample_tokens : 0;
  generation.continuations = std::max(options.samples, 1);
  generation.sampling.temperature = options.temperature;  // seeds 0.. (continuation i: seed i)
  generation.stop_at_eos = false;
  generation.prefill_chunk = 0;  // one pass: the recompute is monolithic
  generation.prompt_logits_from = grafted_tokens;
  return generation;
}

GraftCheckResult compare_graft_check(std::span<const float> graft_rows, std::span<const int32_t> graft_samples,
                                     std::span<const float> recompute_rows,
                                     std::span<const int32_t> recompute_samples, int64_t grafted_tokens,
                                     size_t n_vocab, const GraftCheckOptions& options) {
  GraftCheckResult r;
  r.grafted_tokens = grafted_tokens;
  r.positions = int64_t(recompute_rows.size() / n_vocab);
  r.graft_logits_sha256 = logits_sha256(graft_rows);
  r.recompute_logits_sha256 = logits_sha256(recompute_rows);
  // A non-finite logit makes every comparison meaningless (NaN compares
  // unequal to itself, and a KL over it is NaN, which std::max would drop):
  // such a check reports KL NaN and is never exact.
  const bool finite = all_finite(graft_rows) && all_finite(recompute_rows);
  const size_t compared = std::min(graft_rows.size(), recompute_rows.size()) / n_vocab;
  int64_t agree = 0;
  for (size_t p = 0; p < compared; ++p) {
    const std::span<const float> g = graft_rows.subspan(p * n_vocab, n_vocab);
    const std::span<const float> m = recompute_rows.subspan(p * n_vocab, n_vocab);
    r.kl_max = std::max(r.kl_max, kl_divergence(m, g));
    agree += argmax(g) == argmax(m);
  }
  r.argmax_agreement = r.positions > 0 ? double(agree) / double(r.positions) : 0;
  if (!finite) r.kl_max = std::numeric_limits<double>::quiet_NaN();
  const bool bytes_equal = r.positions > 0 && graft_rows.size() == recompute_rows.size() &&
                           std::memcmp(graft_rows.data(), recompute_rows.data(), recompute_rows.size_bytes()) == 0;

  // Continuation s of each side: its s-th part of an equal split.
  r.samples = std::max(options.samples, 0);
  const size_t graft_each = r.samples > 0 ? graft_samples.size() / size_t(r.samples) : 0;
  const size_t recompute_each = r.samples > 0 ? recompute_samples.size() / size_t(r.samples) : 0;
  const bool split = graft_each * size_t(r.samples) == graft_samples.size() &&
                     recompute_each * size_t(r.samples) == recompute_samples.size();
  for (int s = 0; split && s < r.samples; ++s) {
    const auto a = graft_samples.subspan(size_t(s) * graft_each, graft_each);
    const auto b = recompute_samples.subspan(size_t(s) * recompute_each, recompute_each);
    r.samples_equal += std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  r.exact = finite && bytes_equal && r.samples_equal == r.samples;
  return r;
}

GraftCheckResult graft_check(std::shared_ptr<const Model> model, const EngineOptions& engine, const Digest& artifact,
                             const ArtifactOpener& open, std::span<const int32_t> prompt,
                             const GraftCheckOptions& options, const ProgressCheck& check) {
  const auto start = std::chrono::steady_clock::now();
  Session grafted(model, engine);
  const int64_t grafted_tokens = graft(grafted, artifact, open, prompt).n_tokens;
  require_positions_to_compare(grafted_tokens, prompt.size());
  const auto rest = prompt.subspan(size_t(grafted_tokens));
  const double graft_seconds = seconds_since(start);
  const Side graft_side = run_side(0, grafted, rest, options, grafted_tokens, check);

  Session monolithic(model, engine);
  const Side recompute_side = run_side(1, monolithic, prompt, options, grafted_tokens, check);

  GraftCheckResult r = compare_graft_check(graft_side.rows, graft_side.result.tokens, recompute_side.rows,
                                           recompute_side.result.tokens, grafted_tokens,
                                           size_t(model->config().n_vocab), options);
  r.graft_seconds = graft_seconds + graft_side.result.prefill_seconds;
  r.recompute_seconds = recompute_side.result.prefill_seconds;
  return r;
}

}  // namespace kvg
