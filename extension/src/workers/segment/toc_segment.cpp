// Segments laid out by shm_toc (toc_segment.hpp).
#include "extension/src/workers/segment/toc_segment.hpp"

#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "storage/dsm.h"
#include "storage/shm_toc.h"
}

namespace kvg::pg::toc_segment {

dsm_segment* create(uint64_t magic, std::span<const Chunk> chunks, void** places) {
  shm_toc_estimator estimate;
  shm_toc_initialize_estimator(&estimate);
  for (const Chunk& chunk : chunks) shm_toc_estimate_chunk(&estimate, chunk.bytes);
  shm_toc_estimate_keys(&estimate, chunks.size());
  const Size segment_bytes = shm_toc_estimate(&estimate);
  dsm_segment* segment = dsm_create(segment_bytes, 0);
  shm_toc* toc = shm_toc_create(magic, dsm_segment_address(segment), segment_bytes);
  for (size_t i = 0; i < chunks.size(); ++i) {
    places[i] = shm_toc_allocate(toc, chunks[i].bytes);
    shm_toc_insert(toc, chunks[i].key, places[i]);
  }
  return segment;
}

void* find(dsm_segment* segment, uint64_t magic, uint64_t key) {
  shm_toc* toc = shm_toc_attach(magic, dsm_segment_address(segment));
  return toc ? shm_toc_lookup(toc, key, true) : nullptr;
}

size_t bytes_after(dsm_segment* segment, const void* place) {
  const char* end = static_cast<const char*>(dsm_segment_address(segment)) + dsm_segment_map_length(segment);
  return size_t(end - static_cast<const char*>(place));
}

}  // namespace kvg::pg::toc_segment
