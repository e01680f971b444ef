#include "extension/src/artifacts/artifact_cache.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "extension/src/artifacts/lo_store.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/artifacts/artifact_settings.hpp"
#include "storage/byte_stream.hpp"
#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "miscadmin.h"
}

namespace kvg::pg {

VerifiedBytes::Bytes ArtifactCache::find(const ArtifactCacheKey& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return nullptr;
  order_.splice(order_.begin(), order_, it->second.position);
  ++stats_.hits;
  return it->second.bytes;
}

void ArtifactCache::insert(const ArtifactCacheKey& key, VerifiedBytes::Bytes bytes, uint64_t capacity) {
  if (!bytes || bytes->size() > capacity || entries_.contains(key)) return;
  shrink_to(capacity - bytes->size());
  order_.push_front(key);
  bytes_ += bytes->size();
  entries_.emplace(key, Entry{std::move(bytes), order_.begin()});
}

void ArtifactCache::shrink_to(uint64_t capacity) {
  while (bytes_ > capacity && !order_.empty()) {
    auto it = entries_.find(order_.back());
    bytes_ -= it->second.bytes->size();
    entries_.erase(it);
    order_.pop_back();
    ++stats_.evictions;
  }
}

ArtifactCacheStats ArtifactCache::stats(uint64_t capacity) const {
  ArtifactCacheStats s = stats_;
  s.entries = entries_.size();
  s.bytes = bytes_;
  s.capacity = capacity;
  return s;
}

ArtifactCache& backend_artifact_cache() {
  static ArtifactCache cache;
  return cache;
}

std::unique_ptr<ByteSource> open_through_cache(LoStore& store, const Digest& id) {
  const StoredArtifact row = store.require(id);  // the row under this snapshot, every time
  ArtifactCache& cache = backend_artifact_cache();
  const uint64_t capacity = settings::artifact_cache_bytes();
  cache.shrink_to(capacity);
  if (capacity == 0) return store.get_unverified(id);
  const ArtifactCacheKey key{uint32_t(MyDatabaseId), id, row.loid};
  if (auto bytes = cache.find(key)) return std::make_unique<VerifiedBytes>(VerifiedBytes::vouched(bytes, id));
  cache.count_miss();
  if (row.bytes > capacity) return store.get_unverified(id);
  // In the store's chunks: the source polls cancellation before each.
  auto source = store.get_unverified(id);
  if (auto checked = VerifiedBytes::read_checked(*source, row.bytes, id, kLargeObjectChunkBytes)) {
    cache.insert(key, checked->bytes(), capacity);
    return std::make_unique<VerifiedBytes>(std::move(*checked));
  }
  // Not what its name says: read it again as a stream, so that graft()
  // reports precisely what is wrong with it.
  return store.get_unverified(id);
}

VerifiedBytes::Bytes verified_artifact_bytes(LoStore& store, const Digest& id) {
  const StoredArtifact row = store.require(id);
  if (settings::artifact_cache_bytes() > 0)
    if (auto bytes = backend_artifact_cache().find(ArtifactCacheKey{uint32_t(MyDatabaseId), id, row.loid})) return bytes;
  auto source = store.get_unverified(id);
  if (auto checked = VerifiedBytes::read_checked(*source, row.bytes, id, kLargeObjectChunkBytes))
    return checked->bytes();
  throw Error(ErrorCode::Corrupt, "artifact " + to_hex(id) + ": its stored bytes do not hash to its name");
}

}  // namespace kvg::pg
