#!/usr/bin/env bash
# An auditor's year (#38): a chain of ROWS audit rows (default 1,000,000),
# appended with kvg.audit_insert as the audit writer appends them (answer
# rows with an output text, every hash field filled), then
#   - the whole chain exported with kvg_manifest_lines (psql, FETCH_COUNT)
#     and checked offline with scripts/kvg-manifest-check.py: time, file size,
#     and the peak memory of psql and of the checker;
#   - kvg_manifest() of the whole chain, for comparison (one jsonb value);
#   - kvg_audit_verify(): the whole chain;
#   - kvg_audit_verify(seq, hash) from a checkpoint 1,000 rows before the head.
# Figures, not a test: it asserts only that every check passes.
#   KVG_PGPORT=55560 flock /tmp/kvg-pg.lock scripts/bench-audit-chain.sh [ROWS]
set -uo pipefail
source "$(dirname "$0")/pg-env.sh"
cd "$repo"
rows=${1:-1000000}
"$repo/scripts/pg-cluster.sh" start >/dev/null || exit 1
db=kvg_bench_chain
PGOPTIONS='-c client_min_messages=warning' psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" \
  -c "CREATE DATABASE $db" || exit 1
q() { psql -X -At -v ON_ERROR_STOP=1 -d $db "$@"; }
out=$(mktemp -d)
trap 'rm -rf "$out"; PGOPTIONS="-c client_min_messages=warning" psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db"' EXIT
now() { date +%s.%N; }
secs() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$2"; }
peak_kb() { sed -n 's/^\s*Maximum resident set size (kbytes): //p' "$1"; }

q -c "CREATE EXTENSION kvg" >/dev/null || exit 1
# Appended in transactions of 10,000 rows, one statement each: between them
# the session reports its changes, so autovacuum keeps the head's table small
# (as the audit writer's reports do: extension/src/workers/writer/writer_main.cpp).
for ((i = 0; i < rows; i += 10000)); do
  echo "SELECT count(kvg.audit_insert('answer', 'postgres', repeat('f', 64), 'f32-portable-v1',
               encode(sha256(convert_to('question ' || i, 'UTF8')), 'hex'), repeat('a', 64),
               encode(sha256(convert_to('answer number ' || i || ' of the year', 'UTF8')), 'hex'),
               repeat('b', 64), 40, 8, 32, 'recurring', 1 + i % 100, i % 10 <> 0,
               'answer number ' || i || ' of the year', 900, 40, 800))
        FROM generate_series($i, $((i + 10000 > rows ? rows : i + 10000)) - 1) i;"
done >"$out/append.sql"
q -c "SET synchronous_commit = off" -f "$out/append.sql" >/dev/null || exit 1
q -c "VACUUM ANALYZE kvg.audit" >/dev/null

t0=$(now)
/usr/bin/time -v psql -X -At -v ON_ERROR_STOP=1 -v FETCH_COUNT=10000 -d $db -c 'SELECT kvg_manifest_lines()' \
  >"$out/manifest.jsonl" 2>"$out/psql.time" || { cat "$out/psql.time"; exit 1; }
t1=$(now)
/usr/bin/time -v python3 scripts/kvg-manifest-check.py "$out/manifest.jsonl" >"$out/check.out" 2>"$out/check.time" ||
  { cat "$out/check.out" "$out/check.time"; exit 1; }
t2=$(now)
q -c 'SELECT kvg_manifest()' >/dev/null 2>"$out/one.err"
one=$([ -s "$out/one.err" ] && sed -n 's/^ERROR:  //p' "$out/one.err" | head -1 || echo "ok")
t3=$(now)
full=$(q -c 'SELECT ok FROM kvg_audit_verify()')
t4=$(now)
read -r cp_seq cp_hash < <(q -F ' ' -c "SELECT seq, row_hash FROM kvg.audit WHERE seq = (SELECT last_seq - 1000 FROM kvg.audit_head)")
t5=$(now)
incremental=$(q -c "SELECT ok FROM kvg_audit_verify($cp_seq, '$cp_hash')")
t6=$(now)

echo "audit chain of $(q -c 'SELECT count(*) FROM kvg.audit') rows"
printf '| %-58s | %10s | %s\n' "step" "seconds" "notes"
printf '| %-58s | %10s | %s\n' "kvg_manifest_lines -> file (psql FETCH_COUNT=10000)" "$(secs "$t0" "$t1")" \
  "$(du -m "$out/manifest.jsonl" | cut -f1) MB, psql peak $(( $(peak_kb "$out/psql.time") / 1024 )) MB"
printf '| %-58s | %10s | %s\n' "scripts/kvg-manifest-check.py (one line at a time)" "$(secs "$t1" "$t2")" \
  "$(head -1 "$out/check.out"), peak $(( $(peak_kb "$out/check.time") / 1024 )) MB"
printf '| %-58s | %10s | %s\n' "kvg_manifest() (one jsonb)" "$(secs "$t2" "$t3")" "$one"
printf '| %-58s | %10s | %s\n' "kvg_audit_verify() (the whole chain)" "$(secs "$t3" "$t4")" "ok = $full"
printf '| %-58s | %10s | %s\n' "kvg_audit_verify(seq, hash): the last 1,000 rows" "$(secs "$t5" "$t6")" "ok = $incremental"
[ "$full" = t ] && [ "$incremental" = t ] && grep -q "^manifest ok: $rows rows" "$out/check.out"
