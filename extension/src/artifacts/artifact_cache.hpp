// The verified-artifact cache of one backend: the bytes of artifacts this
// backend has read from their large objects and hashed in full, so that a
// recurring graft (kvg_answer over a library entry) copies them from memory
// instead of reading and hashing them again. Bounded by
// kvg.artifact_cache_memory (0: off), least recently used evicted first.
//
// An entry is keyed by (database, SHA-256, large object): it is only ever
// served after the caller found the artifact's row in kvg.artifacts under
// the current snapshot, naming that same large object, so a deleted, rolled
// back or dropped artifact is not served, and a re-created one is read
// afresh. What is served are the bytes that hashed to the key, never the
// large object's current contents. Why that is safe: docs/artifact-lifecycle.md.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <tuple>

#include "storage/byte_stream.hpp"
#include "storage/verified_bytes.hpp"

namespace kvg::pg {

class LoStore;

struct ArtifactCacheKey {
  uint32_t database = 0;
  Digest sha256{};
  uint32_t loid = 0;
  auto operator<=>(const ArtifactCacheKey&) const = default;
};

struct ArtifactCacheStats {
  uint64_t entries = 0, bytes = 0, capacity = 0;
  uint64_t hits = 0, misses = 0, evictions = 0;
};

// Plain C++ (no PostgreSQL): the LRU bookkeeping.
class ArtifactCache {
 public:
  // The bytes under `key`, made most recently used; nullptr when absent.
  VerifiedBytes::Bytes find(const ArtifactCacheKey& key);
  // Keeps `bytes` when they fit in `capacity` (evicting the least recently
  // used entries to make room); larger ones are not kept.
  void insert(const ArtifactCacheKey& key, VerifiedBytes::Bytes bytes, uint64_t capacity);
  // Evicts until at most `capacity` bytes are held (0: empties the cache).
  void shrink_to(uint64_t capacity);
  void count_miss() { ++stats_.misses; }
  ArtifactCacheStats stats(uint64_t capacity) const;

 private:
  using Order = std::list<ArtifactCacheKey>;  // most recently used first
  struct Entry {
    VerifiedBytes::Bytes bytes;
    Order::iterator position;
  };
  std::map<ArtifactCacheKey, Entry> entries_;
  Order order_;
  uint64_t bytes_ = 0;
  ArtifactCacheStats stats_;
};

// This backend's cache.
ArtifactCache& backend_artifact_cache();

// The opener of EngineCall (engine/graft.hpp's ArtifactOpener): the verified
// bytes from the cache when this backend holds them; otherwise, with the
// cache on and the artifact within its bound, the large object read whole,
// checked and kept; otherwise the large object as a stream (graft() hashes
// it). NotFound when the artifact has no row.
std::unique_ptr<ByteSource> open_through_cache(LoStore& store, const Digest& id);

// The bytes of `id`, checked in full against its name: this backend's cache
// entry, or its large object read and checked (not kept here: they are for
// the engine worker's cache, engine_worker.hpp). NotFound when the artifact
// has no row, Corrupt when its bytes are not what its name says.
VerifiedBytes::Bytes verified_artifact_bytes(LoStore& store, const Digest& id);

}  // namespace kvg::pg
