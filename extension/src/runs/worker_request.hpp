// The request a call hands the engine worker (workers/engine/engine_worker.hpp)
// for one generation, and what its backend does around it: refuse it before
// it queues when it could never fit, and supply the artifacts the worker
// lacks. Shared by generation_run.cpp and graft_check_run.cpp.
#pragma once

#include <cstdint>
#include <span>

#include "engine/generate.hpp"
#include "extension/src/calls/engine_call.hpp"
#include "extension/src/calls/prefix_reuse.hpp"
#include "extension/src/workers/engine/engine_worker.hpp"

namespace kvg::pg {

// The prompt, the chain chosen for it (by identity, its links' rows read
// from `store`: the worker asks for the bytes it lacks), the model and
// settings the caller runs with (`engine`), what `options` say, and the KV
// bound `max_kv_bytes` (a share of kvg.max_kv_memory when `kv_share`).
// Refused (Internal) for options that decide per token (on_token): such a
// generation runs in its backend.
engine_worker::GenerationRequest worker_request(const Model& model, const EngineOptions& engine, LoStore& store,
                                                std::span<const int32_t> prompt, const ChosenPrefix& chosen,
                                                const GenerateOptions& options, int64_t max_kv_bytes, bool kv_share);
// The same for a call's generation: its model, settings and store.
inline engine_worker::GenerationRequest worker_request(EngineCall& call, std::span<const int32_t> prompt,
                                                       const ChosenPrefix& chosen, const GenerateOptions& options,
                                                       int64_t max_kv_bytes, bool kv_share) {
  return worker_request(*call.model, call.options, call.store, prompt, chosen, options, max_kv_bytes, kv_share);
}

// A request whose KV could never fit kvg.engine_kv_memory is refused here
// (53200), before it is queued.
void refuse_if_never_fits(const Model& model, const engine_worker::GenerationRequest& request);

// What the worker lacks, read from `store` with the caller's rights and checked.
engine_worker::Supply supply_from(LoStore& store);

}  // namespace kvg::pg
