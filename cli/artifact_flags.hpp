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
#include "engine/positional_compose.hpp"
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
// Resolves one artifact named like --artifact (a file, or a hash with
// --store); `flag` names where the name came from in errors.
ArtifactRef resolve_artifact_named(const Args& args, const std::string& name, const char* flag);
// The tokens of the whole prompt when an artifact (whose chain holds
// `chain_tokens`) precedes it: --tokens is the whole prompt, --text is the
// continuation after the artifact's tokens.
std::vector<int32_t> prompt_after_artifact(const Args& args, const Model& model,
                                           const std::vector<int32_t>& chain_tokens);
// --compose-positional A,B,...: the named blocks (files, or hashes in
// --store) placed in that order in `session` by graft_positional() — not exact.
PositionalComposition graft_positional_flag(const Args& args, Session& session);
// All tokens of a chain, root first.
std::vector<int32_t> chain_tokens(const ArtifactRef& ref);

}  // namespace kvg::cli
