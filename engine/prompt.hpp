// How text becomes a prompt, the same for the CLI and the extension: a fresh
// prompt gets the model's BOS; text after an artifact continues its chain's
// tokens without a space prefix.
#pragma once

#include <string_view>
#include <vector>

#include "engine/graft.hpp"
#include "engine/model.hpp"

namespace kvg {

// Work is bounded before it begins (docs/security.md): text that cannot fit
// in the context is refused by its length, before it is tokenized, and a
// prompt by its token count as soon as it is encoded. Tokenizing calls
// `check` as it goes, so a caller can cancel it.
//
// `context` is the most positions a context may reach: the model's
// context_length when 0 (EngineOptions::context_limit says the same).
//
// The most bytes of prompt text the context can hold.
size_t max_prompt_bytes(const Model& model, int64_t context = 0);
// OutOfRange, naming `what`, when `bytes` exceed max_prompt_bytes.
void check_prompt_bytes(const Model& model, size_t bytes, const char* what, int64_t context = 0);
// OutOfRange when `n_tokens` exceed the context.
void check_prompt_tokens(const Model& model, size_t n_tokens, int64_t context = 0);

// Text with nothing before it (BOS first when the model adds one).
std::vector<int32_t> fresh_prompt(const Model& model, std::string_view text, const ProgressCheck& check = {},
                                  int64_t context = 0);

// Every token of the artifact chain ending in `leaf`, root first.
std::vector<int32_t> chain_tokens(const Digest& leaf, const ArtifactOpener& open);

// The chain's tokens, then `text` encoded as their continuation.
std::vector<int32_t> prompt_after_chain(const Model& model, const std::vector<int32_t>& chain, std::string_view text,
                                        const ProgressCheck& check = {}, int64_t context = 0);

}  // namespace kvg
