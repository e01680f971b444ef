// kvg.artifact_cache_stats() returns table(entries, bytes, capacity, hits,
// misses, evictions), read through the view kvg.artifact_cache: this
// backend's verified-artifact cache (artifact_cache.hpp) — entries, bytes
// held, capacity (from kvg.artifact_cache_memory), and hits, misses and
// evictions since the backend started. How the tests and benchmarks see a
// graft served from it.
#include <string>
#include <vector>

#include "extension/src/artifacts/artifact_cache.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/artifacts/artifact_settings.hpp"
#include "extension/src/spi/sql_values.hpp"
#include "extension/src/pg/postgres.hpp"

using namespace kvg;
using namespace kvg::pg;

KVG_SQL_FUNCTION(kvg_artifact_cache_stats) {
  const ArtifactCacheStats s = backend_artifact_cache().stats(settings::artifact_cache_bytes());
  std::vector<ResultValue> row;
  for (const uint64_t v : {s.entries, s.bytes, s.capacity, s.hits, s.misses, s.evictions})
    row.push_back(Int64GetDatum(int64_t(v)));
  return_rows(fcinfo, {row});
  return Datum(0);
}
