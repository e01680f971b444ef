// The three phases of `kvg eval`, in one process and one library:
//   cold       every question answered by plain generation (the question
//              alone in the template), checked by its verifier;
//   recurring  the learning part's verified solutions deposited (kvg_learn's
//              path; a question without a solution is deposited only when its
//              cold answer verified, as kvg_solve does), then the same
//              questions answered through routing and grafting;
//   transfer   the held-out questions, never deposited, routed to related
//              entries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/eval/eval_items.hpp"
#include "cli/eval/eval_library.hpp"

namespace kvg::cli {

struct EvalRecord {
  std::string phase;  // cold | recurring | transfer
  std::string kind;   // the item's kind label ("" when none)
  std::string mode;   // how it was routed
  bool correct = false;
  int64_t prompt_tokens = 0, grafted_tokens = 0, decoded_tokens = 0;
  double ms = 0;
  double flops = 0;  // an estimate (eval_flops)
};

struct EvalPlan {
  int64_t learn = 0;       // the first `learn` items are the learning part, the rest held out
  int64_t max_tokens = 96;
  int64_t checks = 8;      // grafted answers replayed by graft_check
};

struct EvalOutcome {
  std::vector<EvalRecord> records;
  int64_t deposited = 0;
  int64_t checked = 0, checked_exact = 0;
};

// `progress` (may be null) gets one line per finished phase.
EvalOutcome run_eval(EvalLibrary& library, const std::vector<EvalItem>& items, const EvalPlan& plan,
                     std::FILE* progress);

// Floating-point operations of computing `computed` positions starting at
// position `from` (matrix products and attention; an estimate from the
// model's shape, not a measurement).
double eval_flops(const ModelConfig& config, int64_t from, int64_t computed);

}  // namespace kvg::cli
