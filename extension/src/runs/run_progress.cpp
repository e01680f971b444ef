#include "extension/src/runs/run_progress.hpp"

#include <numeric>
#include <utility>

namespace kvg::pg {

namespace {

int64_t sum(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }

}  // namespace

RunProgress::RunProgress(std::vector<int64_t> prompt_tokens, int64_t max_tokens_each, call_progress::Phase first,
                         ProgressReport prefill_notices, ProgressReport decode_notices)
    : tracker_(sum(prompt_tokens), max_tokens_each * int64_t(prompt_tokens.size()), first),
      prompts_(std::move(prompt_tokens)),
      max_tokens_(max_tokens_each),
      prefill_notices_(std::move(prefill_notices)),
      decode_notices_(std::move(decode_notices)),
      evaluated_(prompts_.size(), 0),
      to_evaluate_(prompts_),
      decoded_(prompts_.size(), 0) {}

void RunProgress::prefilled(size_t i, int64_t done, int64_t total) {
  evaluated_[i] = done;
  to_evaluate_[i] = total;
  int64_t positions = 0;  // of every prompt, the grafted ones included
  for (size_t k = 0; k < prompts_.size(); ++k) positions += prompts_[k] - to_evaluate_[k] + evaluated_[k];
  tracker_.prefilled(positions);
  if (prefill_notices_) prefill_notices_(sum(evaluated_), sum(to_evaluate_));
}

void RunProgress::decoded(size_t i, int64_t tokens) {
  decoded_[i] = tokens;
  const int64_t all = sum(decoded_);
  tracker_.decoded(all);
  if (decode_notices_) decode_notices_(all, max_tokens_ * int64_t(prompts_.size()));
}

ProgressReport RunProgress::prefill_report(size_t i) {
  return [this, i](int64_t done, int64_t total) { prefilled(i, done, total); };
}

ProgressReport RunProgress::decode_report(size_t i) {
  return [this, i](int64_t done, int64_t) { decoded(i, done); };
}

engine_worker::Progress RunProgress::for_worker() {
  engine_worker::Progress progress;
  progress.started = [this] { phase(call_progress::Phase::Prefill); };
  progress.prefilled = [this](size_t i, int64_t done, int64_t total) { prefilled(i, done, total); };
  progress.decoded = [this](size_t i, int64_t tokens) { decoded(i, tokens); };
  return progress;
}

}  // namespace kvg::pg
