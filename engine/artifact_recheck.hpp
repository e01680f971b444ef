// Whether an artifact's KV is what this engine computes for its tokens.
//
// An artifact's SHA-256 proves its bytes are intact, not who computed them:
// anyone can write a well-formed artifact whose KV belongs to other tokens
// (docs/security.md). Because the artifact format is canonical and the recipe
// exact, recomputing the KV from the tokens alone — no stored KV is read —
// and capturing the same positions gives the same bytes, and so the same
// identity, exactly when the artifact is genuine.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/graft.hpp"
#include "engine/session.hpp"
#include "storage/artifact_format.hpp"

namespace kvg {

struct Recomputed {
  Digest identity{};    // of the artifact this engine produces for the same positions
  int64_t tokens = 0;   // positions prefilled (the whole chain up to the artifact's end)
  double seconds = 0;
};

// What recomputing the artifact `header` describes takes: every token of
// the chain it ends (the parents' tokens from their headers, through `open`,
// then its own), and `options` under the artifact's own recipe. Refuses
// (ModelMismatch, RecipeMismatch) an artifact of another model or of a
// recipe this engine does not compute, and a chain that cannot fit (54000),
// before any work. Reads the model's configuration only: a model loaded
// without its weights will do (the engine worker then recomputes).
struct RecomputePlan {
  std::vector<int32_t> tokens;
  EngineOptions options;
};
RecomputePlan plan_recompute(const Model& model, const EngineOptions& options, const ArtifactHeader& header,
                             const ArtifactOpener& open);

// Prefills, in a fresh session, the plan's tokens and captures the
// artifact's positions with its parent: plan_recompute, then the work.
// `report`: the plan's tokens prefilled, chunk by chunk.
Recomputed recompute_artifact(std::shared_ptr<const Model> model, const EngineOptions& options,
                              const ArtifactHeader& header, const ArtifactOpener& open, const ProgressCheck& check,
                              const ProgressReport& report = {});

// A description of the first KV value that is NaN or infinite ("layer 3 V,
// token 5, element 17"), or nullopt when all are finite. No recipe computes
// a non-finite KV value from finite weights, so such an artifact is refused.
std::optional<std::string> first_non_finite_kv(const ArtifactHeader& header, std::span<const uint8_t> artifact);

}  // namespace kvg
