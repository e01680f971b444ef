#include "extension/src/runs/graft_check_run.hpp"

#include <algorithm>
#include <vector>

#include "common/error.hpp"
#include "extension/src/calls/prefix_reuse.hpp"
#include "extension/src/runs/run_progress.hpp"
#include "extension/src/runs/worker_request.hpp"
#include "extension/src/workers/engine/engine_worker.hpp"

namespace kvg::pg {

GraftCheckResult run_graft_check(EngineCall& call, const StoredPrefix& artifact, std::span<const int32_t> prompt,
                                 const GraftCheckOptions& options) {
  if (!artifact.leaf) throw Error(ErrorCode::Internal, "a graft check names no artifact");
  const bool in_worker = engine_worker::in_use();
  // Two generations of the prompt: its graft's and its recompute's.
  const int64_t samples = std::max(options.samples, 1) * (options.samples > 0 ? options.sample_tokens : 0);
  RunProgress progress({int64_t(prompt.size()), int64_t(prompt.size())}, samples,
                       in_worker ? call_progress::Phase::Queued : call_progress::Phase::Prefill,
                       progress_notices("graft check: prefilled"), progress_notices("graft check: decoded"));
  if (!in_worker) {
    GraftCheckOptions reporting = options;
    for (size_t side = 0; side < 2; ++side) {
      reporting.prefill_reports[side] = progress.prefill_report(side);
      reporting.decode_reports[side] = progress.decode_report(side);
    }
    return graft_check(call.model, call.options, *artifact.leaf, call.open, prompt, reporting, kCheckInterrupts);
  }
  require_positions_to_compare(artifact.end, prompt.size());
  GenerateOptions generation = graft_check_generation(options, artifact.end);
  // Chunked in the worker whatever kvg.engine_pass_tokens says (0: no
  // bound): a chunk's logits rows are held there until its caller reads
  // them, and the worker's memory is everyone's. Chunks change no bit.
  generation.prefill_chunk = kPrefillChunk;
  const int64_t max_kv = call.options.max_kv_bytes;
  std::vector<engine_worker::GenerationRequest> sides = {
      worker_request(call, prompt, exactly(call, artifact), generation, max_kv, false),
      worker_request(call, prompt, ChosenPrefix{}, generation, max_kv, false),  // nothing grafted
  };
  for (const auto& side : sides) refuse_if_never_fits(*call.model, side);
  const std::vector<engine_worker::WorkerGeneration> ran =
      engine_worker::generate_together(sides, supply_from(call.store), progress.for_worker());
  const engine_worker::WorkerGeneration& graft = ran[0];
  const engine_worker::WorkerGeneration& recompute = ran[1];
  if (graft.done.grafted_tokens != artifact.end)
    throw Error(ErrorCode::Internal, "the engine worker grafted " + std::to_string(graft.done.grafted_tokens) +
                                         " positions of a chain of " + std::to_string(artifact.end));
  GraftCheckResult r =
      compare_graft_check(graft.prompt_logits, graft.result.tokens, recompute.prompt_logits, recompute.result.tokens,
                          artifact.end, size_t(call.model->config().n_vocab), options);
  r.graft_seconds = double(graft.done.graft_micros) / 1e6 + graft.result.prefill_seconds;
  r.recompute_seconds = recompute.result.prefill_seconds;
  return r;
}

}  // namespace kvg::pg
