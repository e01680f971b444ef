#!/usr/bin/env bash
# Load with numbers (not part of the test command): pgbench, 8 clients for
# 60 s by default, mixing recurring / transfer / cold kvg_answer, kvg_learn of
# the same and of different questions, kvg_capture and kvg_graft_check on
# stories260K (scripts/load/*.sql). Then checks: no client aborted (0
# unexpected errors), one knowledge entry per question key, one artifact row
# per hash, every artifact verifies, no orphans, the audit chain verifies.
# Prints throughput and p50/p99 per function, and backend RSS with 1 and
# with 8 clients.
#   KVG_PGPORT=55501 flock /tmp/kvg-pg.lock scripts/bench-load.sh [SECONDS] [CLIENTS]
set -uo pipefail
source "$(dirname "$0")/pg-env.sh"
cd "$repo"
seconds=${1:-60}
clients=${2:-8}
"$repo/scripts/pg-cluster.sh" start >/dev/null || exit 1
model=${KVG_LOAD_MODEL:-$pg_files/models/stories260K.gguf}
db=kvg_load
PGOPTIONS='-c client_min_messages=warning' psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" || exit 1
q() { psql -X -At -v ON_ERROR_STOP=1 -d $db -c "$1"; }
q "CREATE EXTENSION kvg" >/dev/null
q "ALTER DATABASE $db SET kvg.model = '$model'" >/dev/null
q "ALTER DATABASE $db SET kvg.device = 'cpu'" >/dev/null
q "SELECT kvg_learn('What color is the sky?', 'contains', 'The sky is blue.', 'blue')" >/dev/null || exit 1
artifact=$(q "SELECT kvg_capture('Once upon a time')") || exit 1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
scripts=(answer_recurring answer_transfer answer_cold learn_same learn_different capture graft_check)
args=()
for s in "${scripts[@]}"; do args+=(-f "scripts/load/$s.sql@1"); done

rss() {  # sums VmRSS (kB) of this database's client backends, sampled mid-run
  local pids total=0
  pids=$(q "SELECT pid FROM pg_stat_activity WHERE datname = '$db' AND backend_type = 'client backend' AND pid <> pg_backend_pid()")
  for p in $pids; do
    total=$((total + $(awk '/^VmRSS/ { print $2 }' /proc/$p/status 2>/dev/null || echo 0)))
  done
  echo "$total $(echo $pids | wc -w)"
}

run() {  # run CLIENTS SECONDS TAG
  (cd "$out" && pgbench -n -c "$1" -j "$1" -T "$2" -D artifact="'$artifact'" -l --log-prefix="$3" \
    "${args[@]/#scripts/$repo/scripts}" $db >"$out/$3.txt" 2>&1) &
  local bench=$!
  sleep $(($2 / 2 + 1))
  rss >"$out/$3.rss"
  wait $bench
}

echo "pgbench: 1 client, 10 s (for RSS), then $clients clients, $seconds s, scripts: ${scripts[*]}"
run 1 10 one
status1=$?
run "$clients" "$seconds" many
status=$?
grep -E "aborted|failed|tps|number of transactions actually" "$out/many.txt"
python3 "$repo/scripts/bench-load-report.py" "$out" "${scripts[@]}"
read -r rss1 n1 <"$out/one.rss"
read -r rss8 n8 <"$out/many.rss"
echo "backend RSS: 1 client: $((rss1 / 1024)) MB in $n1 backend(s); $clients clients: $((rss8 / 1024)) MB in $n8 backends ($((rss8 / 1024 / (n8 > 0 ? n8 : 1))) MB each)"

problems=0
[ "$status1" = 0 ] && [ "$status" = 0 ] && ! grep -q "aborted in command" "$out/many.txt" "$out/one.txt" ||
  { echo "FAILED: a client aborted (an unexpected error):"; grep -h "ERROR\|aborted" "$out"/*.txt | sort | uniq -c | head; problems=1; }
check() {
  local v
  v=$(q "$2")
  echo "$1: $v"
  [ "$v" = "$3" ] || problems=1
}
check "knowledge keys with more than one entry" "SELECT count(*) FROM (SELECT question_key FROM kvg.knowledge GROUP BY 1 HAVING count(*) > 1) d" 0
check "artifact hashes with more than one row" "SELECT count(*) FROM (SELECT sha256 FROM kvg.artifacts GROUP BY 1 HAVING count(*) > 1) d" 0
check "artifacts that do not verify" "SELECT count(*) FILTER (WHERE NOT (kvg_artifact_verify(sha256)).ok) FROM kvg.artifacts" 0
check "orphans" "SELECT count(*) FROM kvg_orphans()" 0
check "kvg_audit_verify()" "SELECT (kvg_audit_verify()).ok" t
echo "rows: $(q "SELECT format('%s knowledge entries, %s artifacts, %s audit rows', (SELECT count(*) FROM kvg.knowledge), (SELECT count(*) FROM kvg.artifacts), (SELECT count(*) FROM kvg.audit))")"
[ $problems = 0 ] && echo "load: every check passed" || { echo "load: FAILED"; exit 1; }
