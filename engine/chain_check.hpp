// The checks every link of an artifact chain passes before its KV counts,
// shared by graft() (engine/graft.hpp: copies the KV into the cache) and
// mapped KV (engine/mapped_kv.hpp: reads it in place), so both refuse the
// same artifacts with the same messages.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/artifact_chain.hpp"
#include "engine/session.hpp"
#include "storage/artifact_format.hpp"

namespace kvg {

// The chain ending in `leaf`, from its headers alone (nothing trusted yet).
struct ChainPlan {
  std::vector<ArtifactHeader> headers;  // root first, as chain_headers() read them
  std::vector<Digest> ids;              // ids[i] names headers[i]
};

// Walks the chain's headers and, when `prompt` is given, checks that it
// begins with the session's tokens followed by the chain's: every refusal
// that needs no payload comes before any payload is read.
ChainPlan plan_chain(const Session& session, const Digest& leaf, const ArtifactOpener& open,
                     std::optional<std::span<const int32_t>> prompt);

// Checks a plan's links in order, each against its header as read from its
// bytes now: compatible with the session's model and recipe, starting where
// the previous link ended, naming it as parent, unchanged since the walk,
// and with the chain token hash of the tokens before it.
class ChainLinkChecker {
 public:
  // The chain continues the session's tokens.
  explicit ChainLinkChecker(const Session& session);
  void check_header(const ChainPlan& plan, size_t i, const ArtifactHeader& h);
  // The link's bytes hash to its name (nothing of it counts before this).
  static void check_identity(const Digest& identity, const Digest& id);

 private:
  const Session& session_;
  int64_t position_;
  TokenHasher running_;
};

// "artifact <first 16 hex digits>: ", how every refusal names a link.
std::string artifact_label(const Digest& id);

}  // namespace kvg
