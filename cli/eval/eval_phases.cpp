#include "cli/eval/eval_phases.hpp"

#include <cstdio>

#include "cli/eval/eval_answer.hpp"
#include "cli/eval/eval_verifier.hpp"
#include "common/error.hpp"
#include "engine/graft_check.hpp"

namespace kvg::cli {

double eval_flops(const ModelConfig& c, int64_t from, int64_t computed) {
  const double q_width = double(c.n_head) * c.head_dim, kv_width = double(c.n_head_kv) * c.head_dim;
  const double per_layer = double(c.n_embd) * (2 * q_width + 2 * kv_width) + 3.0 * c.n_embd * c.n_ff;
  const double weights = c.n_layer * per_layer + double(c.n_embd) * c.n_vocab;
  double flops = 0;
  for (int64_t p = from; p < from + computed; ++p)
    flops += 2 * weights + 4.0 * c.n_layer * double(p + 1) * q_width;  // scores and values over p+1 keys
  return flops;
}

namespace {

EvalRecord record(const std::string& phase, const EvalItem& item, const EvalAnswer& a, const ModelConfig& config) {
  EvalRecord r;
  r.phase = phase;
  r.kind = item.kind;
  r.mode = a.mode;
  r.correct = verify_answer(item.verifier, a.answer, item.answer);
  r.prompt_tokens = a.prompt_tokens;
  r.grafted_tokens = a.grafted_tokens;
  r.decoded_tokens = a.decoded_tokens;
  r.ms = a.ms;
  // Prefill evaluates the prompt after the graft; decoding feeds back every
  // token but the last.
  const int64_t computed = (a.prompt_tokens - a.grafted_tokens) + (a.decoded_tokens > 0 ? a.decoded_tokens - 1 : 0);
  r.flops = eval_flops(config, a.grafted_tokens, computed);
  return r;
}

}  // namespace

EvalOutcome run_eval(EvalLibrary& library, const std::vector<EvalItem>& items, const EvalPlan& plan,
                     std::FILE* progress) {
  if (plan.learn < 1 || plan.learn >= int64_t(items.size()))
    throw Error(ErrorCode::InvalidArgument, "the learning part must hold 1.." + std::to_string(items.size() - 1) +
                                                " of the " + std::to_string(items.size()) +
                                                " questions, so that some are held out (got " +
                                                std::to_string(plan.learn) + ")");
  const ModelConfig& config = library.model()->config();
  EvalOutcome out;
  std::vector<EvalAnswer> colds;
  colds.reserve(items.size());
  for (const EvalItem& item : items) {
    colds.push_back(answer_question(library, item.question, plan.max_tokens, true));
    out.records.push_back(record("cold", item, colds.back(), config));
  }
  if (progress) std::fprintf(progress, "cold: %zu questions answered\n", items.size());

  for (int64_t i = 0; i < plan.learn; ++i) {
    const EvalItem& item = items[size_t(i)];
    bool stored;
    if (!item.solution.empty()) {
      stored = library.learn(item.question, item.solution, item.answer, item.verifier).stored;
    } else {
      // No solution given: the cold answer is one when it verified (as kvg_solve deposits; scripts/eval.sql the same).
      stored = out.records[size_t(i)].correct &&
               library.learn(item.question, colds[size_t(i)].answer, item.answer, item.verifier).stored;
    }
    out.deposited += stored ? 1 : 0;
  }
  if (progress) std::fprintf(progress, "deposited %lld of %lld learning questions\n", (long long)out.deposited,
                             (long long)plan.learn);

  std::vector<EvalAnswer> grafted;
  for (size_t i = 0; i < items.size(); ++i) {
    const bool learning = int64_t(i) < plan.learn;
    EvalAnswer a = answer_question(library, items[i].question, plan.max_tokens, false);
    out.records.push_back(record(learning ? "recurring" : "transfer", items[i], a, config));
    if (a.leaf) grafted.push_back(std::move(a));
    if (progress && int64_t(i) + 1 == plan.learn) std::fprintf(progress, "recurring: %lld answered\n", (long long)plan.learn);
  }
  if (progress) std::fprintf(progress, "transfer: %zu answered\n", items.size() - size_t(plan.learn));

  // graft_check on evenly spaced grafted answers: the grafted run's logits
  // bytes must equal a full recomputation's at every position after the graft.
  const size_t n = std::min(grafted.size(), size_t(std::max<int64_t>(plan.checks, 0)));
  for (size_t k = 0; k < n; ++k) {
    const EvalAnswer& a = grafted[k * grafted.size() / n];
    const GraftCheckResult r =
        graft_check(library.model(), library.options(), *a.leaf, library.opener(), a.tokens, GraftCheckOptions{});
    ++out.checked;
    out.checked_exact += r.exact ? 1 : 0;
  }
  return out;
}

}  // namespace kvg::cli
