#!/usr/bin/env bash
# 16 concurrent SERIALIZABLE callers store artifacts (each its own, and all
# of them one shared content) and generate from what they stored in the same
# statement: no call fails, and no transaction ends in a serialization
# failure from kvg (artifacts are stored by the audit writer, outside the
# callers' transactions: docs/audit-chain.md, "Artifacts").
# kvg_learn is not among them: concurrent learners of different questions
# still conflict under SSI on the library itself (kvg.knowledge: each reads
# the question-key index page that the others insert into), which is not
# about artifacts; one SERIALIZABLE learn is tested in
# tests/pgtap/22_artifact_worker.sql.
# Usage: serializable_test.sh DATABASE MODEL (the server's copy), against the
# cluster scripts/pg-env.sh names (PGHOST/PGPORT set by the caller).
set -uo pipefail
db=$1
model=$2
script=$(mktemp /tmp/kvg-serializable.XXXXXX.sql)
out=$(mktemp /tmp/kvg-serializable.XXXXXX.log)
trap 'rm -f "$script" "$out"' EXIT
cat >"$script" <<'SQL'
\set n random(1, 1000000000)
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT count(*) FROM kvg.artifacts;
SELECT kvg_capture('Everyone stores this prompt: the cat sat on the mat.');
SELECT kvg_generate(p || ' It', 2, artifact => kvg_capture(p))
  FROM (SELECT 'Caller ' || :client_id || ' number ' || :n || ': the dog ran to the park.' AS p) s;
COMMIT;
SQL
chmod 644 "$script"
PGOPTIONS="-c kvg.model=$model -c kvg.device=cpu" \
  pgbench -n --failures-detailed --verbose-errors -c 16 -j 4 -t 3 -f "$script" "$db" >"$out" 2>&1
status=$?
cat "$out"
failures=$(grep -cE 'ERROR:|could not serialize|aborted' "$out")
processed=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out")
failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$out")
echo "pgbench exit $status; processed ${processed:-?}; failed ${failed:-?}; error lines $failures"
if [ "$status" = 0 ] && [ "${processed:-0}" = 48 ] && [ "${failed:-0}" = 0 ] && [ "$failures" = 0 ]; then
  echo "ok 1 - 16 concurrent SERIALIZABLE callers: capture and generate, no failure"
  exit 0
fi
echo "not ok 1 - 16 concurrent SERIALIZABLE callers: capture and generate, no failure"
exit 1
