#!/usr/bin/env bash
# kvg bench-store end to end, against a running server with kvg installable
# (e.g. scripts/pg-cluster.sh's, PGHOST/PGPORT/PGUSER in the environment).
# Exits 77 (skipped) when no server answers. Usage: bench_store_test.sh KVG DATA_DIR (tests/data)
set -u
kvg=$1
model=$2/models/stories260K.gguf
if ! pg_isready -q 2>/dev/null; then
  echo "skipped: no PostgreSQL server answers (set PGHOST/PGPORT, e.g. scripts/pg-cluster.sh start)"
  exit 77
fi
out=$("$kvg" bench-store --db dbname=postgres --sizes 1,2 --repeat 1 --model "$model" --graft-tokens 300 2>&1)
status=$?
failed=0
expect() { echo "$out" | grep -qE "$1" || { echo "FAIL: no line matching: $1"; failed=1; }; }
expect '^\| 1 MiB \| [0-9]+ \| [0-9]+ \| [0-9]+ \| [0-9.]+ \| [0-9]+ \| [0-9]+ \| [0-9.]+ \|$'
expect '^\| 2 MiB \| '
expect '^\| graft from the large object \+ 1 token \| [0-9]+ \| [0-9]+ \|'
expect 'outputs equal in all 3 rounds: true'
[ $status = 0 ] || { echo "FAIL: exit status $status"; failed=1; }
[ $failed = 0 ] || echo "$out"
exit $failed
