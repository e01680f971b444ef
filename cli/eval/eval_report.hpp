// What `kvg eval` prints: per phase (cold, recurring, transfer) accuracy,
// decoded tokens, prefill tokens recomputed and grafted, ms and an estimate
// of FLOPs per answer, overall and per item kind; as a table or one JSON
// object (--json).
#pragma once

#include <string>

#include "cli/eval/eval_phases.hpp"

namespace kvg::cli {

struct EvalSummaryHeader {
  std::string model, source;  // the model file; the questions' file or generator and seed
  int64_t questions = 0, learning = 0, held_out = 0;
  // The knowledge template the prompts were laid out with ("{solution}" and
  // "{question}" in it) and where it came from: flag, model (its
  // kvg.knowledge_template key), chat format or default.
  std::string template_text, template_source;
};

std::string eval_json(const EvalSummaryHeader& header, const EvalOutcome& outcome);
std::string eval_table(const EvalSummaryHeader& header, const EvalOutcome& outcome);

}  // namespace kvg::cli
