#!/usr/bin/env bash
# Audited calls under load, and what the audit writer adds to one call
# (docs/audit-chain.md). Figures, not a test: nothing here is asserted
# except that every call succeeded and the chain verifies afterwards.
#   1. pgbench, CLIENTS (16) clients for SECONDS (30) s, a mix of audited
#      calls on stories260K: kvg_answer (recurring), kvg_learn (different
#      questions), kvg_generate (8 tokens), kvg_artifact_verify, kvg_export.
#      Prints calls/s and p50/p99 latency, per function and in all.
#   2. One session, 1000 kvg_generate calls of 1 token, one after another:
#      the median call, and (when the extension reports it, DEBUG1) the
#      median time the call waited for the audit writer to commit its row.
#   KVG_PGPORT=55560 flock /tmp/kvg-pg.lock scripts/bench-audit.sh [SECONDS] [CLIENTS]
# With KVG_BENCH_AS_INSTALLED=1 it measures the server as it runs, with
# whatever kvg is installed (to compare another build, e.g. main's, installed
# from its own checkout), instead of installing this checkout's first.
set -uo pipefail
source "$(dirname "$0")/pg-env.sh"
cd "$repo"
seconds=${1:-30}
clients=${2:-16}
if [ -z "${KVG_BENCH_AS_INSTALLED:-}" ]; then "$repo/scripts/pg-cluster.sh" start >/dev/null || exit 1; fi
model=${KVG_LOAD_MODEL:-$pg_files/models/stories260K.gguf}
db=kvg_bench_audit
PGOPTIONS='-c client_min_messages=warning' psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" \
  -c "CREATE DATABASE $db" || exit 1
q() { psql -X -At -v ON_ERROR_STOP=1 -d $db -c "$1"; }
q "CREATE EXTENSION kvg" >/dev/null || exit 1
q "ALTER DATABASE $db SET kvg.model = '$model'" >/dev/null
q "ALTER DATABASE $db SET kvg.device = 'cpu'" >/dev/null
q "SELECT kvg_learn('What color is the sky?', 'contains', 'The sky is blue.', 'blue')" >/dev/null || exit 1
artifact=$(q "SELECT kvg_capture('Once upon a time')") || exit 1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
scripts=(answer_recurring learn_different generate verify export)
args=()
for s in "${scripts[@]}"; do args+=(-f "$repo/scripts/load/$s.sql@1"); done

echo "== $clients clients, $seconds s: ${scripts[*]}"
(cd "$out" && pgbench -n -c "$clients" -j "$clients" -T "$seconds" -D artifact="'$artifact'" -l --log-prefix=many \
  "${args[@]}" $db >"$out/many.txt" 2>&1)
status=$?
grep -E "aborted|failed|number of transactions actually" "$out/many.txt"
python3 "$repo/scripts/bench-load-report.py" "$out" "${scripts[@]}"
echo "chain verifies: $(q 'SELECT (kvg_audit_verify()).ok')"

echo "== one session, 1000 kvg_generate calls of 1 token, one after another"
{
  echo "SET client_min_messages = debug1;"
  echo "\\timing on"
  for i in $(seq 1 1000); do echo "SELECT kvg_generate('Once upon a time $i', 1);"; done
} | psql -X -q -d $db -o /dev/null >"$out/one.txt" 2>&1
python3 - "$out/one.txt" <<'PY'
import re, statistics, sys
text = open(sys.argv[1]).read()
calls = [float(x) for x in re.findall(r"^Time: ([0-9.]+) ms", text, re.M)]
waits = [int(x) for x in re.findall(r"committed by the audit writer in ([0-9]+) us", text)]
print(f"calls: {len(calls)}, median {statistics.median(calls):.3f} ms" if calls else "calls: none timed")
if waits:
    print(f"waited for the audit writer: median {statistics.median(waits) / 1000:.3f} ms "
          f"(p99 {sorted(waits)[int(0.99 * (len(waits) - 1))] / 1000:.3f} ms) of {len(waits)} calls")
else:
    print("waited for the audit writer: not reported (this build writes audit rows in the caller's transaction)")
PY
PGOPTIONS='-c client_min_messages=warning' psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db"
exit $status
