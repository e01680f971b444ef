// kvg_import's recomputation (engine/artifact_recheck.hpp), run where
// kvg.engine says: in this backend, or in the engine worker as a capture
// that grafts nothing (no stored KV is read) — the chain's tokens prefilled
// from position 0, the artifact's positions captured with its parent — so a
// backend in worker mode loads no model weights for it. The same identity
// either way: the capture is the same bytes (engine/generate.hpp).
#pragma once

#include "engine/artifact_recheck.hpp"
#include "extension/src/artifacts/lo_store.hpp"

namespace kvg::pg {

// The parents' tokens are read from `store` (their headers only).
Recomputed run_recompute(const ArtifactHeader& header, LoStore& store);

}  // namespace kvg::pg
