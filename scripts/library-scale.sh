#!/usr/bin/env bash
# The library at scale (issue #14, docs/library-scale.md): fills a fresh
# database with seeded template entries for stories260K (scripts/library/
# fill.sql: two questions per story) up to each size in turn, and after each
# prints storage, learn time per entry, routing and kvg_answer latency p50/p99
# and EXPLAIN of the routing queries (scripts/library/measure.sql).
#
#   KVG_PGPORT=55448 flock -o /tmp/kvg-pg.lock scripts/library-scale.sh [SIZE...]   (default: 1000 10000)
#
# Runs against the private cluster (scripts/pg-cluster.sh, started and the
# extension installed here), in database kvg_library (dropped first), in ONE
# psql session: each size is reached by learning the stories after the
# previous size's. With KVG_LIBRARY_LOADED=FILE the file is created once the
# session has loaded kvg's library (a wrapper may release the install lock
# then: the backend keeps the library it loaded).
set -euo pipefail
source "$(dirname "$0")/pg-env.sh"
cd "$repo"
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1000 10000)
seed=${KVG_LIBRARY_SEED:-1}
"$repo/scripts/pg-cluster.sh" start >/dev/null
model=$(stage_for_server "$repo/tests/data/models/stories260K.gguf" models)
PGOPTIONS='-c client_min_messages=warning' psql -X -q -d postgres \
  -c "DROP DATABASE IF EXISTS kvg_library" -c "CREATE DATABASE kvg_library"
psql -X -q -d kvg_library -c "CREATE EXTENSION kvg"
script() {
  echo "SELECT kvg_model_info() IS NOT NULL AS library_loaded \\gset"
  [ -n "${KVG_LIBRARY_LOADED:-}" ] && echo "\\! touch '$KVG_LIBRARY_LOADED'"
  local have=0 size stories
  for size in "${sizes[@]}"; do
    stories=$(((size - have) / 2))
    if [ "$stories" -lt 1 ]; then echo "sizes must grow: $size after $have" >&2; exit 2; fi
    echo "\\echo '=================== $size entries (stories260K, seed $seed) ==================='"
    echo "\\set first $((have / 2 + 1))"
    echo "\\set stories $stories"
    echo "SELECT clock_timestamp() AS size_start \\gset"
    echo "\\ir scripts/library/fill.sql"
    echo "\\ir scripts/library/measure.sql"
    echo "SELECT round(extract(epoch FROM clock_timestamp() - :'size_start'::timestamptz)) AS seconds_to_fill_and_measure;"
    have=$size
  done
}
script | PGOPTIONS="-c kvg.model=$model -c kvg.device=cpu" psql -X -q -d kvg_library \
  -v seed="$seed" -v samples=200 -v answers=50 -v ON_ERROR_STOP=1
