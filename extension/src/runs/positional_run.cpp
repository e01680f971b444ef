#include "extension/src/runs/positional_run.hpp"

#include <algorithm>
#include <chrono>
#include <set>

#include "common/error.hpp"
#include "engine/positional_compose.hpp"
#include "engine/prompt.hpp"
#include "extension/src/model/model_settings.hpp"
#include "extension/src/runs/run_progress.hpp"
#include "extension/src/runs/worker_request.hpp"
#include "extension/src/workers/engine/engine_worker.hpp"

namespace kvg::pg {

namespace {

void require_text_after(const PositionalRun& run) {
  if (int64_t(run.prompt.size()) <= run.composed)
    throw Error(ErrorCode::InvalidArgument, "prompt must not be empty: it is evaluated after the artifacts");
}

PositionalRun in_this_backend(EngineCall& call, std::span<const Digest> blocks, const std::string& text,
                              const GenerateOptions& options) {
  PositionalRun run;
  Session session(call.model, call.options);
  const auto began = std::chrono::steady_clock::now();
  run.composed = graft_positional(session, blocks, call.open, kCheckInterrupts).n_tokens;
  run.compose_micros = micros_since(began);
  run.prompt = prompt_after_chain(*call.model, session.tokens(), text, kCheckInterrupts, settings::max_context());
  require_text_after(run);
  RunProgress progress({int64_t(run.prompt.size())}, options.max_new_tokens, call_progress::Phase::Prefill,
                       options.prefill_report, options.decode_report);
  GenerateOptions reporting = options;
  reporting.prefill_report = progress.prefill_report(0);
  reporting.decode_report = progress.decode_report(0);
  run.result = generate(session, std::span<const int32_t>(run.prompt).subspan(size_t(run.composed)), reporting);
  return run;
}

// The worker composes the blocks as graft_positional() does here, every
// link verified again there; this backend reads only the blocks' tokens
// (and sends the links the worker lacks, with the caller's rights).
PositionalRun in_the_worker(EngineCall& call, std::span<const Digest> blocks, const std::string& text,
                            const GenerateOptions& options) {
  PositionalRun run;
  std::vector<int32_t> composed;
  for (const Digest& block : blocks) {
    const std::vector<int32_t> tokens = chain_tokens(block, call.open);
    composed.insert(composed.end(), tokens.begin(), tokens.end());
  }
  run.composed = int64_t(composed.size());
  require_composition_fits(blocks.size(), 0, run.composed, positions_reached(*call.model, call.options));
  run.prompt = prompt_after_chain(*call.model, composed, text, kCheckInterrupts, settings::max_context());
  require_text_after(run);
  engine_worker::GenerationRequest request =
      worker_request(call, run.prompt, ChosenPrefix{}, options, call.options.max_kv_bytes, false);
  std::set<Digest> listed;
  for (const Digest& block : blocks) {
    request.positional_blocks.push_back(block);
    for (const StoredArtifact& row : call.store.chain(block))
      if (listed.insert(row.id).second) request.links.push_back({row.id, row.loid});
  }
  refuse_if_never_fits(*call.model, request);
  RunProgress progress({int64_t(run.prompt.size())}, options.max_new_tokens, call_progress::Phase::Queued,
                       options.prefill_report, options.decode_report);
  engine_worker::WorkerGeneration ran =
      engine_worker::generate(request, supply_from(call.store), progress.for_worker());
  if (ran.done.grafted_tokens != run.composed)
    throw Error(ErrorCode::Internal, "the engine worker composed " + std::to_string(ran.done.grafted_tokens) +
                                         " positions of blocks holding " + std::to_string(run.composed));
  run.compose_micros = ran.done.graft_micros;
  run.result = std::move(ran.result);
  return run;
}

}  // namespace

PositionalRun run_positional(EngineCall& call, std::span<const Digest> blocks, const std::string& text,
                             const GenerateOptions& options) {
  return engine_worker::in_use() ? in_the_worker(call, blocks, text, options)
                                 : in_this_backend(call, blocks, text, options);
}

}  // namespace kvg::pg
