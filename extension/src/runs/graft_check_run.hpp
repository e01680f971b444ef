// kvg_graft_check's comparison (engine/graft_check.hpp), run where
// kvg.engine says: in this backend, or in the engine worker as two sequences
// of its own (the graft, its chain attended in place from the worker's KV
// files, and the recompute from position 0), each sending back its logits
// rows and its sampled continuations, batched with everyone's passes. Either
// way the same generations (graft_check_generation) and the same verdict
// (compare_graft_check), so a check gives the same hashes in both modes.
#pragma once

#include <cstdint>
#include <span>

#include "engine/graft_check.hpp"
#include "engine/prefix_search.hpp"
#include "extension/src/calls/engine_call.hpp"

namespace kvg::pg {

// `artifact` is the chain to graft (its leaf and its positions); `prompt`
// begins with its tokens and goes on past them.
GraftCheckResult run_graft_check(EngineCall& call, const StoredPrefix& artifact, std::span<const int32_t> prompt,
                                 const GraftCheckOptions& options);

}  // namespace kvg::pg
