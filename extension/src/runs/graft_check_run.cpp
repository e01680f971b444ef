#include "extension/src/runs/graft_check_run.hpp"

#include <vector>

#include "common/error.hpp"
#include "extension/src/calls/prefix_reuse.hpp"
#include "extension/src/runs/worker_request.hpp"
#include "extension/src/workers/engine/engine_worker.hpp"

namespace kvg::pg {

GraftCheckResult run_graft_check(EngineCall& call, const StoredPrefix& artifact, std::span<const int32_t> prompt,
                                 const GraftCheckOptions& options) {
  if (!artifact.leaf) throw Error(ErrorCode::Internal, "a graft check names no artifact");
  if (!engine_worker::in_use())
    return graft_check(call.model, call.options, *artifact.leaf, call.open, prompt, options, kCheckInterrupts);
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
      engine_worker::generate_together(sides, supply_from(call.store));
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
