#!/usr/bin/env bash
# 16 concurrent SERIALIZABLE callers, each transaction one kind of call:
# capture and generate from what it stored (each its own content, and all of
# them one shared content), learn a new question, learn a known one again,
# answer a known question, answer a related one. No call fails and no
# transaction ends in a serialization failure from kvg: artifacts and audit
# rows are committed by the audit writer outside the callers' transactions
# (docs/audit-chain.md), and a learn inserts before it looks, so learners of
# different questions never read the index page the others insert into
# (extension/src/knowledge/knowledge_deposit.cpp).
# Usage: serializable_test.sh DATABASE MODEL (the server's copy), against the
# cluster scripts/pg-env.sh names (PGHOST/PGPORT set by the caller).
set -uo pipefail
db=$1
model=$2
dir=$(mktemp -d /tmp/kvg-serializable.XXXXXX)
out=$dir/pgbench.log
trap 'rm -rf "$dir"' EXIT
# call NAME SQL: one script, one SERIALIZABLE transaction around SQL.
call() {
  printf '\\set n random(1, 1000000000)\n\\set k random(1, 20)\n%s\n%s\nCOMMIT;\n' \
    'BEGIN ISOLATION LEVEL SERIALIZABLE;' "$2" >"$dir/$1.sql"
}
call capture "SELECT count(*) FROM kvg.artifacts;
SELECT kvg_capture('Everyone stores this prompt: the cat sat on the mat.');
SELECT kvg_generate(p || ' It', 2, artifact => kvg_capture(p))
  FROM (SELECT 'Caller ' || :client_id || ' number ' || :n || ': the dog ran to the park.' AS p) s;"
call learn_new "SELECT kvg_learn('What colour is box ' || :client_id || 'x' || :n || '?', 'contains',
                 'Box ' || :client_id || 'x' || :n || ' is red.', 'red');"
call learn_again "SELECT kvg_learn('What colour is box seed' || :k || '?', 'contains', 'Box seed' || :k || ' is red.', 'red');"
call answer "SELECT kvg_answer('What colour is box seed' || :k || '?', 4);"
call answer_related "SELECT kvg_answer('What colour is the box seed' || :k || ' today?', 4);"
chmod -R a+rX "$dir"
PGOPTIONS="-c kvg.model=$model -c kvg.device=cpu" psql -X -q -v ON_ERROR_STOP=1 -d "$db" -c \
  "SELECT count(kvg_learn('What colour is box seed' || i || '?', 'contains', 'Box seed' || i || ' is red.', 'red'))
   FROM generate_series(1, 20) i" >/dev/null || { echo "not ok 1 - the library's 20 seed entries"; exit 1; }
PGOPTIONS="-c kvg.model=$model -c kvg.device=cpu" \
  pgbench -n --failures-detailed --verbose-errors -c 16 -j 4 -t 6 \
  -f "$dir/capture.sql" -f "$dir/learn_new.sql" -f "$dir/learn_again.sql" -f "$dir/answer.sql" \
  -f "$dir/answer_related.sql" "$db" >"$out" 2>&1
status=$?
cat "$out"
failures=$(grep -cE 'ERROR:|could not serialize|aborted' "$out")
processed=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out")
failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$out")
echo "pgbench exit $status; processed ${processed:-?}; failed ${failed:-?}; error lines $failures"
if [ "$status" = 0 ] && [ "${processed:-0}" = 96 ] && [ "${failed:-0}" = 0 ] && [ "$failures" = 0 ]; then
  echo "ok 1 - 16 concurrent SERIALIZABLE callers: capture, generate, learn and answer, no failure"
  exit 0
fi
echo "not ok 1 - 16 concurrent SERIALIZABLE callers: capture, generate, learn and answer, no failure"
exit 1
