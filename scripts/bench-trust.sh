#!/usr/bin/env bash
# What the trust boundaries cost and what they bound (docs/security.md),
# measured on the private cluster (scripts/pg-cluster.sh) with a real model:
#   1. an oversized prompt is refused, and how long the refusal takes;
#   2. audited calls of other sessions while one transaction with an audited
#      call stays open for HOLD seconds (count, latency p50/p99);
#   3. importing a genuine artifact with verification (recomputation) vs
#      without, and a forged one refused;
#   4. the storage quota refusing a role's import, and kvg.storage_usage.
#
#   KVG_MODEL=/path/model.gguf scripts/bench-trust.sh      (default: the server's copy of the vendored
#                                                           stories260K; a KVG_MODEL must be readable by the server)
#   KVG_BENCH_HOLD=20 (seconds the transaction stays open), KVG_BENCH_CLIENTS=2
set -euo pipefail
source "$(dirname "$0")/pg-env.sh"
model=${KVG_MODEL:-$pg_files/models/stories260K.gguf}
hold=${KVG_BENCH_HOLD:-20}
clients=${KVG_BENCH_CLIENTS:-2}
db=kvg_bench_trust

"$repo/scripts/pg-cluster.sh" start >/dev/null
[ -r "$model" ] || { echo "no readable model at $model (set KVG_MODEL)" >&2; exit 2; }
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
psql -X -q -d "$db" -c "CREATE EXTENSION kvg" -c "ALTER DATABASE $db SET kvg.model = '$model'" \
  -c "ALTER DATABASE $db SET kvg.device = 'cpu'"
q() { psql -X -q -At -d "$db" "$@"; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Milliseconds of one statement, measured by the server's clock.
elapsed_ms() {
  q -c "DO \$\$ DECLARE t0 timestamptz := clock_timestamp(); BEGIN
          BEGIN PERFORM $1; EXCEPTION WHEN OTHERS THEN RAISE NOTICE '%: %', SQLSTATE, SQLERRM; END;
          RAISE NOTICE 'ms %', round(extract(epoch FROM clock_timestamp() - t0)::numeric * 1000, 1); END \$\$" 2>&1 |
    sed -n 's/.*NOTICE:  //p' | paste -sd ' '
}

echo "== 1. oversized prompts (refused before tokenizing)"
printf '%-12s %s\n' size "outcome and time"
for mb in 1 20 50; do
  printf '%-12s %s\n' "$mb MB" "$(elapsed_ms "kvg_generate(repeat('a', $mb * 1024 * 1024), 4)")"
done
printf '%-12s %s\n' "50 MB alone" "$(elapsed_ms "length(repeat('a', 50 * 1024 * 1024))") (building the argument, no kvg)"
printf '%-12s %s\n' "a prompt" "$(elapsed_ms "kvg_generate('Once upon a time', 4)") (a whole 4-token generation)"

echo
echo "== 2. audited calls while another transaction with an audited call stays open ${hold} s"
echo "SELECT kvg_generate('Once upon a time', 4);" >"$work/call.sql"
psql -X -q -d "$db" -c "BEGIN" -c "SELECT kvg_generate('Once upon a time', 4)" -c "SELECT pg_sleep($hold)" \
  -c "COMMIT" >/dev/null &
holder=$!
sleep 1
(cd "$work" && pgbench -n -d "$db" -c "$clients" -T $((hold - 3)) -f call.sql -l >"$work/pgbench.out" 2>&1) || {
  cat "$work/pgbench.out"; exit 1; }
still_open=0
kill -0 $holder 2>/dev/null && still_open=1
wait $holder
python3 - "$work" "$still_open" <<'PY'
import glob, sys
lat = sorted(int(line.split()[2]) / 1000 for f in glob.glob(sys.argv[1] + "/pgbench_log.*") for line in open(f))
pick = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
print(f"calls completed by other sessions while it was open: {len(lat)}; latency p50 {pick(0.5):.1f} ms, "
      f"p99 {pick(0.99):.1f} ms, max {lat[-1]:.1f} ms; the holder was still open at the end: {sys.argv[2] == '1'}")
PY
echo "audit chain after both: $(q -c "SELECT CASE WHEN ok THEN 'verifies' ELSE 'broken at seq ' || first_bad END FROM kvg_audit_verify()") ($(q -c "SELECT count(*) FROM kvg.audit") rows)"

echo
echo "== 3. import: recomputation vs none"
long=$(python3 -c "print(' '.join(['Once upon a time, there was a little girl named Lily. She liked to play.'] * 60))")
art=$(q -c "SELECT kvg_capture('$long')")
q -c "SELECT n_tokens || ' tokens, ' || bytes || ' bytes' FROM kvg.artifacts WHERE sha256 = '$art'"
q -c "CREATE TABLE bench_bytes AS SELECT kvg_export('$art') AS b" -c "GRANT SELECT ON bench_bytes TO kvg_user"
run_import() {  # verify: true|false -> ms
  q -c "DELETE FROM kvg.artifacts WHERE sha256 = '$art'" \
    -c "SELECT round(extract(epoch FROM clock_timestamp() - s)::numeric * 1000, 1)
        FROM (SELECT clock_timestamp() s) t, LATERAL (SELECT kvg_import(b, verify => $1) FROM bench_bytes) i"
}
unverified=$(run_import false)
verified=$(run_import true)
echo "import without verification: $unverified ms; with recomputation: $verified ms ($(python3 -c "print(f'{$verified / $unverified:.1f}')")x)"
echo "provenance now: $(q -c "SELECT provenance FROM kvg.artifacts WHERE sha256 = '$art'")"

echo
echo "== 4. storage quota"
q -c "CREATE ROLE bench_mallory IN ROLE kvg_user" 2>/dev/null || true
q -c "SELECT role, artifacts, bytes FROM kvg.storage_usage ORDER BY role"
q -c "DELETE FROM kvg.artifacts WHERE sha256 = '$art'" >/dev/null
# The session user pays (SET ROLE would charge this superuser session).
q -c "SET kvg.storage_quota = '64kB'" -c "SET SESSION AUTHORIZATION bench_mallory" \
  -c "SELECT kvg_import(b, verify => false) FROM bench_bytes" 2>&1 | sed -n 's/^.*ERROR:  /refused: /p'
psql -X -q -d postgres -c "DROP DATABASE $db" -c "DROP ROLE IF EXISTS bench_mallory"
