// What a call's generations report while they run, in this backend or in
// the engine worker: kvg.progress (call_progress.hpp: its phase, the prompt
// positions done, grafted ones included, and the tokens decoded, summed over
// the call's generations) and its progress notices (kvg.progress_notices:
// the prompt tokens evaluated of those to evaluate, and the tokens decoded,
// summed alike). One per call; the reports it hands out refer to it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/progress.hpp"
#include "extension/src/calls/call_progress.hpp"
#include "extension/src/workers/engine/engine_worker.hpp"

namespace kvg::pg {

class RunProgress {
 public:
  // The call's generations: each one's prompt length and most tokens
  // decoded (the continuations' together); `first` its phase now (Queued
  // for the worker); the notices' reports, when any (progress_notices).
  RunProgress(std::vector<int64_t> prompt_tokens, int64_t max_tokens_each, call_progress::Phase first,
              ProgressReport prefill_notices = {}, ProgressReport decode_notices = {});
  RunProgress(const RunProgress&) = delete;
  RunProgress& operator=(const RunProgress&) = delete;

  // Generation i: `done` of the `total` prompt tokens it evaluates (the
  // rest of its prompt grafted), and `tokens` decoded.
  void prefilled(size_t i, int64_t done, int64_t total);
  void decoded(size_t i, int64_t tokens);
  void phase(call_progress::Phase phase) { tracker_.phase(phase); }

  // The same, as GenerateOptions' reports of generation i in this backend.
  ProgressReport prefill_report(size_t i);
  ProgressReport decode_report(size_t i);
  // The same, as the engine worker's replies (Started: prefill begins).
  engine_worker::Progress for_worker();

 private:
  call_progress::Tracker tracker_;
  std::vector<int64_t> prompts_;
  int64_t max_tokens_;
  ProgressReport prefill_notices_, decode_notices_;
  std::vector<int64_t> evaluated_, to_evaluate_, decoded_;
};

}  // namespace kvg::pg
