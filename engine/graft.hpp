// Capture and graft: the KV of a token prefix stored as a byte-exact artifact
// (storage/artifact_format.hpp) and put back into a fresh context at its own
// positions. Because the recipe makes every KV row a function of the tokens
// before it only, a grafted context continues bit-identically to one that
// computed the whole prompt itself (docs/design.md, recipe rule 5).
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "engine/artifact_chain.hpp"
#include "engine/session.hpp"
#include "storage/artifact_format.hpp"
#include "storage/byte_stream.hpp"

namespace kvg {

// The header an artifact of positions [from, to) of this session would have.
// `parent` (when given) must describe positions [0, from).
ArtifactHeader capture_header(const Session& session, int64_t from, int64_t to, const std::optional<Digest>& parent);

// Writes the artifact of positions [from, to) to `sink` and returns its
// identity. With a parent, `from` must be the parent's end.
Digest capture(const Session& session, int64_t from, int64_t to, const std::optional<Digest>& parent,
               ByteSink& sink);

struct GraftedChain {
  std::vector<Digest> links;  // root first
  int64_t n_tokens = 0;       // positions now filled from artifacts
};

// Where a graft's time went (wall seconds), for bench-graft and the SQL
// detail functions: the verify part (SHA-256 the graft's thread computed or
// waited for), reading the source, allocating KV room, and the rest (walking
// headers, copying into the cache, checks). A long link's payload is hashed
// behind its reads (ArtifactReader::overlap_hashing): that hashing, not in
// total_s unless waited for, is hashed_behind_s.
struct GraftTimes {
  double total_s = 0, hash_s = 0, source_s = 0, reserve_s = 0;
  double hashed_behind_s = 0;
  double other_s() const { return total_s - hash_s - source_s - reserve_s; }
};

// Grafts the chain ending in `leaf` into `session` (which must hold exactly
// the positions before the chain's root: usually none). Every link is checked
// before its KV counts: the hash of its bytes, model fingerprint, recipe,
// dtype and layout, position continuity, parent linkage, the chain's token
// hash, and — when `prompt` is given — that the prompt begins with the
// chain's tokens. On any refusal the session is left as it was and a
// kvg::Error says precisely why.
GraftedChain graft(Session& session, const Digest& leaf, const ArtifactOpener& open,
                   std::optional<std::span<const int32_t>> prompt = std::nullopt, GraftTimes* times = nullptr);

}  // namespace kvg
