// --artifact / --store / --parent: how the CLI names artifacts. An artifact
// is a file path, or a hash looked up in --store DIR; parents always come
// from the store.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/args.hpp"
#include "engine/graft.hpp"
#include "storage/file_store.hpp"

namespace kvg::cli {

struct ArtifactRef {
  Digest id{};
  ArtifactOpener open;
};

// The store named by --store, if any.
std::shared_ptr<FileStore> store_from(const Args& args);
// Resolves --artifact (a file, or a hash with --store).
ArtifactRef resolve_artifact(const Args& args);
// The tokens of the whole prompt when an artifact (whose chain holds
// `chain_tokens`) precedes it: --tokens is the whole prompt, --text is the
// continuation after the artifact's tokens.
std::vector<int32_t> prompt_after_artifact(const Args& args, const Model& model,
                                           const std::vector<int32_t>& chain_tokens);
// All tokens of a chain, root first.
std::vector<int32_t> chain_tokens(const ArtifactRef& ref);

}  // namespace kvg::cli
