#!/usr/bin/env bash
# The library at scale (issue #14, docs/library-scale.md): for each size, a
# fresh database kvg_library_<size> filled with seeded template entries for
# stories260K (scripts/library/fill.sql: two questions per story); then,
# back to back so that they run under the same machine load, each is measured
# (scripts/library/measure.sql): storage, learn time per entry, routing and
# kvg_answer latency p50/p99, and the plans of the routing queries.
#
#   KVG_PGPORT=55448 flock -o /tmp/kvg-pg.lock scripts/library-scale.sh [SIZE...]   (default: 1000 10000)
#
# Runs against the private cluster (scripts/pg-cluster.sh, started and the
# extension installed here). Hold the lock for the whole run: every psql
# session loads the installed kvg library anew (each session's line prints
# the installed library's hash, so a replacement during the run shows).
#
# A fill commits every 25 stories and reports its progress every 500. With
# KVG_LIBRARY_RESUME=1 a size whose database exists is not refilled from
# scratch: its fill continues after the last committed story.
# KVG_LIBRARY_ROUNDS=N measures every size N times, round by round, each
# round with other probe questions (probe seed = KVG_LIBRARY_PROBE_SEED,
# default the seed, then + 1, ...): on a shared machine one round's p99 is
# mostly noise. Fresh probes matter for the transfer answers, which store
# their composition the first time.
set -euo pipefail
source "$(dirname "$0")/pg-env.sh"
cd "$repo"
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1000 10000)
seed=${KVG_LIBRARY_SEED:-1}
"$repo/scripts/pg-cluster.sh" start >/dev/null
model=$(stage_for_server "$repo/tests/data/models/stories260K.gguf" models)
session() {  # session DB FILE [psql args]: one psql session as the engine's caller
  local db=$1 file=$2
  shift 2
  PGOPTIONS="-c kvg.model=$model -c kvg.device=cpu" psql -X -q -d "$db" -v seed="$seed" -v ON_ERROR_STOP=1 \
    -f "$file" "$@"
}
library_hash() { sha256sum "$(pg_config --pkglibdir)/kvg.so" | cut -c1-16; }
for size in "${sizes[@]}"; do
  db=kvg_library_$size
  first=1
  if [ "${KVG_LIBRARY_RESUME:-0}" = 1 ] &&
     [ "$(psql -X -tA -d postgres -c "SELECT 1 FROM pg_database WHERE datname = '$db'")" = 1 ]; then
    first=$(($(psql -X -tA -d "$db" -c "SELECT coalesce(max(story), 0) FROM public.library_learn_times") + 1))
  else
    PGOPTIONS='-c client_min_messages=warning' psql -X -q -d postgres \
      -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
    psql -X -q -d "$db" -c "CREATE EXTENSION kvg"
  fi
  start=$(date +%s)
  echo "$(date +%T) filling $db from story $first (kvg.so $(library_hash))"
  if [ "$first" -le $((size / 2)) ]; then
    session "$db" scripts/library/fill.sql -v first="$first" -v stories=$((size / 2 - first + 1))
  fi
  echo "$(date +%T) $size entries learned (stories $first..$((size / 2)) in $(($(date +%s) - start)) s)"
done
rounds=${KVG_LIBRARY_ROUNDS:-1}
for ((round = 0; round < rounds; round++)); do
  for size in "${sizes[@]}"; do
    probes=$((${KVG_LIBRARY_PROBE_SEED:-$seed} + round))
    echo "=================== $size entries (stories260K, seed $seed, probe seed $probes; $(date +%T), kvg.so $(library_hash)) ==================="
    session "kvg_library_$size" scripts/library/measure.sql -v samples=200 -v answers=50 -v probe_seed="$probes"
  done
done
