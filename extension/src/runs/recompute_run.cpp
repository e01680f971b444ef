#include "extension/src/runs/recompute_run.hpp"

#include "common/error.hpp"
#include "extension/src/calls/engine_call.hpp"
#include "extension/src/model/engine_context.hpp"
#include "extension/src/runs/run_progress.hpp"
#include "extension/src/runs/worker_request.hpp"
#include "extension/src/workers/engine/engine_worker.hpp"
#include "storage/sha256.hpp"

namespace kvg::pg {

Recomputed run_recompute(const ArtifactHeader& header, LoStore& store) {
  const ArtifactOpener open = [&store](const Digest& id) { return store.get_unverified(id); };
  const EngineOptions options = current_engine_options();
  const ProgressReport notices = progress_notices("import verify: prefilled");
  if (!engine_worker::in_use()) {
    // Its plan prefills the positions up to the artifact's end.
    RunProgress progress({int64_t(header.position_start + header.tokens.size())}, 0, call_progress::Phase::Prefill,
                         notices);
    return recompute_artifact(current_model(ModelUse::Compute), options, header, open, kCheckInterrupts,
                              progress.prefill_report(0));
  }
  const auto model = current_model(generations_use());
  const RecomputePlan plan = plan_recompute(*model, options, header, open);
  GenerateOptions prefill_only;
  prefill_only.max_new_tokens = 0;
  prefill_only.prefill_chunk = kPrefillChunk;
  engine_worker::GenerationRequest request = worker_request(*model, plan.options, store, plan.tokens, ChosenPrefix{},
                                                            prefill_only, options.max_kv_bytes, false);
  request.capture_from = int64_t(header.position_start);
  request.capture_parent = header.parent;
  request.capture_ends = {int64_t(plan.tokens.size())};
  refuse_if_never_fits(*model, request);
  RunProgress progress({int64_t(plan.tokens.size())}, 0, call_progress::Phase::Queued, notices);
  const engine_worker::WorkerGeneration ran = engine_worker::generate(request, supply_from(store), progress.for_worker());
  if (ran.links.size() != 1)
    throw Error(ErrorCode::Internal, "the engine worker sent " + std::to_string(ran.links.size()) +
                                         " links for one recomputed artifact");
  Recomputed r;
  r.identity = sha256(std::span<const uint8_t>(ran.links.front()));
  r.tokens = int64_t(plan.tokens.size());
  r.seconds = ran.result.prefill_seconds;
  return r;
}

}  // namespace kvg::pg
