#!/usr/bin/env bash
# kvg's workers are out of users' reach (docs/operations.md, "Worker slots";
# extension/src/workers/reserved/reserved_workers.hpp): with PostgreSQL's
# default max_worker_processes = 8, users' parallel queries flood every
# background-worker slot they can get, and meanwhile 100 answers, each
# checked by a function verifier (a verifier worker) and audited (the audit
# writer, which stops after 100 ms idle and so is started again for almost
# every call), all succeed and are verified. Before, a flood made every
# audited call fail 53400 and every function verifier fail closed once the
# writer had stopped.
#
# Runs its own throwaway cluster (a temporary directory, port
# KVG_PGPORT+110, Unix socket only). TAP lines. Needs the extension installed
# (scripts/pg-cluster.sh start does that).
#   tests/concurrency/worker_slots_test.sh     (from scripts/pg-test.sh)
set -uo pipefail
source "$(dirname "$0")/../../scripts/pg-env.sh"
model=${KVG_TEST_DATA:-$repo/tests/data}/models/stories260K.gguf
calls=${KVG_SLOT_CALLS:-100}
port=$((pg_port + 110))
dir=$(mktemp -d /tmp/kvg-slots.XXXXXX)
[ "$(id -u)" = 0 ] && chown postgres: "$dir"
cp "$model" "$dir/model.gguf" && server_readable "$dir/model.gguf"
data=$dir/data
export PGHOST=$dir PGPORT=$port PGUSER=postgres PGDATABASE=slots
n=0
failures=0
check() {  # check DESCRIPTION COMMAND...
  n=$((n + 1))
  if "${@:2}"; then echo "ok $n - $1"; else echo "not ok $n - $1"; failures=$((failures + 1)); fi
}
q() { psql -X -At -v ON_ERROR_STOP=1 "$@"; }
flooders=()
cleanup() {
  for pid in "${flooders[@]}"; do kill "$pid" 2>/dev/null; done
  as_postgres "$pg_bin/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1
  rm -rf "$dir"
}
trap cleanup EXIT

init_private_cluster "$data" "$dir" "$port" "max_connections = 30" "shared_buffers = 64MB" \
  "shared_preload_libraries = 'kvg'" "max_worker_processes = 8" "max_parallel_workers = 8" \
  "kvg.audit_writer_idle_timeout = 100" "min_dynamic_shared_memory = 8MB" || exit 1
as_postgres "$pg_bin/pg_ctl" -D "$data" -l "$dir/server.log" -w start >/dev/null || { tail -20 "$dir/server.log"; exit 1; }
# kvg's default for it (workers/segment/segment_space.hpp) is below the
# configuration's: the server's own value stands (tests/pgtap/31_worker_calls.sql
# checks the default where none is set).
check "a min_dynamic_shared_memory the configuration sets stands over kvg's default" \
  test "$(q -d postgres -c 'SHOW min_dynamic_shared_memory')" = 8MB
q -d postgres -c "CREATE DATABASE slots" >/dev/null || exit 1
q -c "CREATE EXTENSION kvg" -c "ALTER DATABASE slots SET kvg.model = '$dir/model.gguf'" \
  -c "ALTER DATABASE slots SET kvg.device = cpu" >/dev/null || exit 1
q -c "CREATE FUNCTION public.has_words(q text, a text) RETURNS boolean LANGUAGE sql RETURN a ~ '[[:alnum:]]'" \
  >/dev/null || exit 1
q -c "SELECT kvg_learn('Where did the red ball roll?', 'public.has_words', 'The red ball rolled under the bed.', 'bed')" \
  >/dev/null || exit 1
q -c "CREATE TABLE big AS SELECT g FROM generate_series(1, 2000000) g" -c "ALTER TABLE big SET (parallel_workers = 8)" \
  -c "ANALYZE big" >/dev/null || exit 1

# The flood: sessions that ask for 8 parallel workers each, again and again.
flood_sql="SET max_parallel_workers_per_gather = 8; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
DO \$\$ BEGIN LOOP PERFORM count(*) FROM big WHERE md5(g::text) LIKE 'ab%'; END LOOP; END \$\$;"
for _ in 1 2 3; do
  psql -X -q -c "$flood_sql" >/dev/null 2>&1 &
  flooders+=($!)
done
# Until the flood holds parallel workers.
flooding=0
for _ in $(seq 1 100); do
  flooding=$(q -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'parallel worker'")
  [ "$flooding" -gt 0 ] && break
  sleep 0.1
done
check "users' parallel queries hold background-worker slots ($flooding parallel workers)" test "$flooding" -gt 0

# The calls, one session each, 150 ms apart: the writer stops between them.
ok=0 results=""
for i in $(seq 1 "$calls"); do
  r=$(q -c "SELECT verified FROM kvg_answer_detail('Where did the red ball roll?', 4)" 2>&1)
  [ "$r" = t ] && ok=$((ok + 1)) || results="$results [$i: $r]"
  sleep 0.15
done
peak=$(grep -c 'background worker "kvg .* exited with exit code 1' "$dir/server.log")
check "during the flood, $ok of $calls audited answers succeed, verified by a function verifier${results:0:300}" \
  test "$ok" = "$calls"
still=$(q -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'parallel worker'")
check "and the flood still held parallel workers at the end ($still)" test "$still" -gt 0
check "the audit chain verifies" test "$(q -c 'SELECT ok FROM kvg_audit_verify()')" = t
echo "# kvg's pooled workers finished $peak tasks (a LOG line each: exit status 1 starts them again)"
echo "1..$n"
exit $((failures > 0))
