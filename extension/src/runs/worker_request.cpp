#include "extension/src/runs/worker_request.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "extension/src/artifacts/artifact_cache.hpp"
#include "extension/src/model/engine_context.hpp"
#include "extension/src/pg/sql_raise.hpp"

namespace kvg::pg {

engine_worker::GenerationRequest worker_request(const Model& model, const EngineOptions& engine, LoStore& store,
                                                std::span<const int32_t> prompt, const ChosenPrefix& chosen,
                                                const GenerateOptions& options, int64_t max_kv_bytes, bool kv_share) {
  if (options.on_token)
    throw Error(ErrorCode::Internal, "a generation that decides per token runs in its backend, not the worker");
  engine_worker::GenerationRequest request;
  request.model_path = model.path();
  request.model_fingerprint = model.fingerprint();
  if (const std::optional<HeldModelFile> held = held_file_of(model))
    request.model_file = {uint64_t(held->file.device), uint64_t(held->file.inode), int64_t(held->file.size),
                          held->file.mtime_ns, held->fd};
  request.recipe = engine.recipe.name();
  request.device = engine.device;
  request.gpu_staging_bytes = engine.gpu_staging_bytes;
  request.max_kv_bytes = max_kv_bytes;
  request.context_limit = engine.context_limit;
  request.max_kv_is_share = kv_share;
  request.prompt.assign(prompt.begin(), prompt.end());
  request.leaf = chosen.chain.leaf;
  request.chain_tokens = chosen.chain.end;
  if (request.leaf)
    for (const StoredArtifact& row : store.chain(*request.leaf)) request.links.push_back({row.id, row.loid});
  request.max_new_tokens = options.max_new_tokens;
  request.temperature = options.sampling.temperature;
  request.top_k = options.sampling.top_k;
  request.top_p = options.sampling.top_p;
  request.seed = options.sampling.seed;
  request.stop_at_eos = options.stop_at_eos;
  request.stop_tokens = options.stop_tokens;
  request.prefill_chunk = options.prefill_chunk;
  request.continuations = options.continuations;
  request.prompt_logits_from = options.prompt_logits_from;
  return request;
}

// The worker would reserve this much for it (engine_worker_main.cpp: the
// prompt and max_new_tokens, within the context it may reach, less a chain
// it attends in place from its KV files), and refuse it only once it took it
// from the queue.
void refuse_if_never_fits(const Model& model, const engine_worker::GenerationRequest& request) {
  const ModelConfig& config = model.config();
  const int64_t mapped = engine_worker::maps_chain_of(request) ? request.chain_tokens : 0;
  const int64_t reach = request.context_limit > 0 ? request.context_limit : config.n_ctx;
  const int64_t positions =
      std::min<int64_t>(int64_t(request.prompt.size()) + std::max<int64_t>(request.max_new_tokens, 1), reach) - mapped;
  const int64_t need = KvCache::bytes_for(config.n_layer, config.kv_row_floats(), positions);
  if (need > engine_worker::kv_memory_bytes())
    raise_sqlstate("53200", engine_worker::never_fits_message(need),
                   "A superuser may raise kvg.engine_kv_memory, or the call may ask for fewer tokens.");
}

engine_worker::Supply supply_from(LoStore& store) {
  return [&store](const std::vector<Digest>& ids) {
    std::vector<std::pair<Digest, VerifiedBytes::Bytes>> artifacts;
    for (const Digest& id : ids) artifacts.emplace_back(id, verified_artifact_bytes(store, id));
    return artifacts;
  };
}

}  // namespace kvg::pg
