// How text becomes a prompt, the same for the CLI and the extension: a fresh
// prompt gets the model's BOS; text after an artifact continues its chain's
// tokens without a space prefix.
#pragma once

#include <string_view>
#include <vector>

#include "engine/graft.hpp"
#include "engine/model.hpp"

namespace kvg {

// Text with nothing before it (BOS first when the model adds one).
std::vector<int32_t> fresh_prompt(const Model& model, std::string_view text);

// Every token of the artifact chain ending in `leaf`, root first.
std::vector<int32_t> chain_tokens(const Digest& leaf, const ArtifactOpener& open);

// The chain's tokens, then `text` encoded as their continuation.
std::vector<int32_t> prompt_after_chain(const Model& model, const std::vector<int32_t>& chain, std::string_view text);

}  // namespace kvg
