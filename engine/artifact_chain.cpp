#include "engine/artifact_chain.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace kvg {

namespace {

ArtifactHeader read_header(const Digest& id, const ArtifactOpener& open) {
  auto source = open(id);
  ArtifactReader reader(*source);
  return reader.header();
}

}  // namespace

std::vector<ArtifactHeader> chain_headers(const Digest& leaf, const ArtifactOpener& open) {
  std::vector<ArtifactHeader> chain;
  Digest id = leaf;
  for (;;) {
    ArtifactHeader h = read_header(id, open);
    const std::optional<Digest> parent = h.parent;
    chain.push_back(std::move(h));
    if (!parent) break;
    if (chain.size() > 100000) throw Error(ErrorCode::Corrupt, "artifact chain is implausibly long (a cycle?)");
    id = *parent;
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

}  // namespace kvg
