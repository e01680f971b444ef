// An artifact chain by identity: how its bytes are opened, and its headers
// walked from the leaf to the root. Shared by graft, the chain checks, mapped
// KV, positional composition and prompt reconstruction.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "storage/artifact_format.hpp"
#include "storage/byte_stream.hpp"

namespace kvg {

// Opens the bytes of an artifact by identity (a store's get_unverified(), or
// a file). Must throw kvg::Error(NotFound) for an unknown identity. It need
// not check the hash: graft() compares every link's identity with its name.
using ArtifactOpener = std::function<std::unique_ptr<ByteSource>(const Digest&)>;

// The headers of a chain, root first, each read from its bytes (a cheap walk
// over parents; graft() re-verifies everything it uses).
std::vector<ArtifactHeader> chain_headers(const Digest& leaf, const ArtifactOpener& open);

}  // namespace kvg
