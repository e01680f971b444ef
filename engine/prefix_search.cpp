#include "engine/prefix_search.hpp"

#include "storage/artifact_format.hpp"

namespace kvg {

namespace {

// hash_token_ids(prompt[start, start + L)) for L = 1 .. prompt.size() - start,
// in one pass over a running hash.
std::vector<Digest> continuation_hashes(std::span<const int32_t> prompt, int64_t start) {
  std::vector<Digest> hashes;
  hashes.reserve(prompt.size() - size_t(start));
  TokenHasher running;
  for (size_t i = size_t(start); i < prompt.size(); ++i) {
    const uint32_t id = uint32_t(prompt[i]);
    running.update(std::span<const uint32_t>(&id, 1));
    TokenHasher copy = running;
    hashes.push_back(copy.finish());
  }
  return hashes;
}

bool better(const StoredPrefix& a, const StoredPrefix& b) {
  if (a.end != b.end) return a.end > b.end;
  return a.leaf && (!b.leaf || *a.leaf < *b.leaf);
}

}  // namespace

StoredPrefix longest_stored_prefix(std::span<const int32_t> prompt, const StoredPrefix& from, const LinkLookup& lookup,
                                   int max_lookups) {
  StoredPrefix best = from;
  std::vector<StoredPrefix> pending{from};
  int lookups = 0;
  while (!pending.empty() && lookups < max_lookups) {
    const StoredPrefix node = pending.back();
    pending.pop_back();
    if (node.end >= int64_t(prompt.size())) continue;
    const std::vector<Digest> hashes = continuation_hashes(prompt, node.end);
    ++lookups;
    for (const StoredLink& link : lookup(node.leaf, hashes)) {
      // Trust the catalog only as far as the hash of exactly that many tokens.
      if (link.n_tokens < 1 || link.n_tokens > int64_t(hashes.size()) ||
          hashes[size_t(link.n_tokens - 1)] != link.tokens_sha256)
        continue;
      const StoredPrefix child{link.id, node.end + link.n_tokens};
      if (better(child, best)) best = child;
      pending.push_back(child);
    }
  }
  return best;
}

}  // namespace kvg
