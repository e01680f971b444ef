// kvg_artifact_cache_stats() returns jsonb: this backend's verified-artifact
// cache (artifact_cache.hpp) — entries, bytes held, capacity (from
// kvg.artifact_cache_memory), and hits, misses and evictions since the
// backend started. How the tests and benchmarks see a graft served from it.
#include <string>

#include "extension/src/artifact_cache.hpp"
#include "extension/src/pg_boundary.hpp"
#include "extension/src/settings.hpp"
#include "extension/src/sql_values.hpp"
#include "extension/src/postgres.hpp"

using namespace kvg;
using namespace kvg::pg;

KVG_SQL_FUNCTION(kvg_artifact_cache_stats) {
  const ArtifactCacheStats s = backend_artifact_cache().stats(settings::artifact_cache_bytes());
  auto field = [](const char* name, uint64_t v) { return "\"" + std::string(name) + "\": " + std::to_string(v); };
  return jsonb_result("{" + field("entries", s.entries) + ", " + field("bytes", s.bytes) + ", " +
                      field("capacity", s.capacity) + ", " + field("hits", s.hits) + ", " + field("misses", s.misses) +
                      ", " + field("evictions", s.evictions) + "}");
}
