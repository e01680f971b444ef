// Automatic prefix reuse: which stored artifact chain is the longest one whose
// tokens begin a prompt. Chain links are looked up by (parent, SHA-256 of the
// link's own token ids) — an index any store can keep next to its artifacts —
// so the search reads no artifact bytes; graft() then verifies everything it
// uses. Because a graft is exact, reuse changes how much is computed, never
// what comes out.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "storage/sha256.hpp"

namespace kvg {

// A stored chain link: its identity, how many tokens it holds, and the hash of
// those tokens (hash_token_ids of the link's own tokens).
struct StoredLink {
  Digest id{};
  int64_t n_tokens = 0;
  Digest tokens_sha256{};
};

// The stored links continuing `parent` (nullopt: roots, which start at
// position 0) whose own token hash is one of `tokens_sha256`, for the loaded
// model and recipe, in a deterministic order.
using LinkLookup =
    std::function<std::vector<StoredLink>(const std::optional<Digest>& parent, std::span<const Digest> tokens_sha256)>;

// A chain, by its last link, and the prompt position where it ends.
struct StoredPrefix {
  std::optional<Digest> leaf;  // nullopt: no chain (end is 0)
  int64_t end = 0;
};

// The longest chain that continues `from` (which must already match the
// prompt's first from.end tokens) and whose tokens are a prefix of `prompt`.
// Every branch that matches is explored (a shorter first link may lead
// further); of equally long chains the one with the smallest leaf identity
// wins, so the answer does not depend on the store's order. At most
// `max_lookups` lookups are made.
StoredPrefix longest_stored_prefix(std::span<const int32_t> prompt, const StoredPrefix& from, const LinkLookup& lookup,
                                   int max_lookups = 64);

}  // namespace kvg
