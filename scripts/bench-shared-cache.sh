#!/usr/bin/env bash
# A recurring answer over a long library entry, asked from a backend that
# never read the entry: what grafting it costs when each backend reads and
# verifies the entry itself (kvg.engine = backend) and when the engine
# worker's verified-artifact cache serves every backend (kvg.engine = worker).
# One run, one cluster; prints a table of graft_ms (kvg_answer_detail) and
# the whole statement's milliseconds.
#
#   scripts/bench-shared-cache.sh MODEL
#
# MODEL is a path the server reads. Environment: KVG_BENCH_ENTRY_TOKENS (the
# entry's solution, default 1900 tokens), KVG_BENCH_RECIPE (default
# q8-portable-v1), KVG_BENCH_DB (default kvg_bench_cache, dropped and
# created), PGHOST/PGPORT/PGUSER (scripts/pg-cluster.sh prints them).
set -euo pipefail
model=${1:?usage: bench-shared-cache.sh MODEL}
tokens=${KVG_BENCH_ENTRY_TOKENS:-1900}
recipe=${KVG_BENCH_RECIPE:-q8-portable-v1}
db=${KVG_BENCH_DB:-kvg_bench_cache}
question='Where is the red box?'
options="-c kvg.model=$model -c kvg.recipe=$recipe -c kvg.device=cpu -c kvg.max_solution_tokens=$((tokens + 100))"

psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
psql -X -q -d "$db" -c "CREATE EXTENSION kvg" >/dev/null
sentence='The red box is on the table in the kitchen. '
per100=$(PGOPTIONS="$options" psql -X -q -At -d "$db" -c \
  "SELECT array_length(kvg_tokenize(repeat('$sentence', 100)), 1)")
repeats=$((tokens * 100 / per100))
PGOPTIONS="$options" psql -X -q -At -d "$db" -v ON_ERROR_STOP=1 -c \
  "SELECT kvg_learn('$question', 'contains', repeat('$sentence', $repeats), 'table') IS NOT NULL" >/dev/null
entry_bytes=$(psql -X -q -At -d "$db" -c "SELECT max(bytes) FROM kvg.artifacts")

# ask MODE [TIMES]: one new backend asks TIMES (default 1) times; per ask
# "graft_ms statement_ms tokens_grafted".
ask() {
  local sql="SELECT round(graft_ms::numeric, 2) || ' ' ||
                    round((extract(epoch FROM clock_timestamp() - statement_timestamp()) * 1000)::numeric, 1) || ' ' ||
                    tokens_grafted
             FROM kvg_answer_detail('$question', 4)"
  local args=() i
  for i in $(seq 1 "${2:-1}"); do args+=(-c "$sql"); done
  PGOPTIONS="$options -c kvg.engine=$1" psql -X -q -At -d "$db" "${args[@]}"
}

echo "entry: $tokens tokens, an artifact of $((entry_bytes / 1048576)) MiB; recipe $recipe"
echo
echo '| mode | who asks | graft_ms | statement ms | tokens grafted |'
echo '|---|---|---:|---:|---:|'
row() { read -r g s t <<<"$3"; echo "| $1 | $2 | $g | $s | $t |"; }
mapfile -t backend < <(ask backend 2)
row backend "a new backend (reads and hashes the entry)" "${backend[0]}"
row backend "the same backend again (its own cache)" "${backend[1]}"
row worker "a new backend, first in the worker (the worker's cache misses)" "$(ask worker)"
row worker "another new backend (the worker's cache)" "$(ask worker)"
row worker "a third new backend" "$(ask worker)"
