// One question answered as kvg_answer_detail answers it, in the eval's
// library: routed, laid out by the template, the longest stored chain that
// begins the prompt grafted, the rest prefilled, one line decoded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/eval/eval_library.hpp"

namespace kvg::cli {

struct EvalAnswer {
  std::string answer;       // the answer line (engine/answer_line.hpp)
  std::string mode;         // cold | recurring | transfer
  int64_t prompt_tokens = 0;
  int64_t grafted_tokens = 0;  // positions grafted and not recomputed
  int64_t decoded_tokens = 0;
  double ms = 0;               // graft + prefill + decode
  std::optional<Digest> leaf;  // the grafted chain
  std::vector<int32_t> tokens; // prompt and decoded tokens: what graft_check replays
};

// `library` routes the question unless `cold` (then the question alone is
// the prompt: the model solves it itself).
EvalAnswer answer_question(EvalLibrary& library, const std::string& question, int64_t max_tokens, bool cold);

}  // namespace kvg::cli
