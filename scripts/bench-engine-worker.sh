#!/usr/bin/env bash
# Concurrent SQL clients decoding, with generations in their own backends
# (kvg.engine = backend) and in the engine worker (kvg.engine = worker), on
# one running cluster, one run: aggregate decode tokens per second for each
# number of clients, the worker's rows per pass, and whether every output is
# the same bytes in both modes (the audit rows' output hashes, call by call).
#
#   scripts/bench-engine-worker.sh MODEL [CLIENTS...]   (default 1 2 4 8 16)
#
# MODEL is a path the server reads. Environment: KVG_BENCH_TOKENS (decoded
# per call, default 64), KVG_BENCH_CALLS (calls per client, default 1),
# KVG_BENCH_ROUNDS (default 1: for each number of clients, rounds of one
# backend run then one worker run; the table gives each mode's median, so a
# machine whose speed drifts weighs less on the ratios),
# KVG_BENCH_RECIPE (default q8-portable-v1),
# KVG_BENCH_DB (default kvg_bench, dropped and created), PGHOST/PGPORT/PGUSER
# (scripts/pg-cluster.sh prints them). Backend mode uses every core per call
# (kvg.threads = 0), the worker every core per pass (kvg.engine_threads = 0).
# tokens/s counts the tokens the audit rows record over the wall time of the
# whole run (prefill of the short prompts included).
set -euo pipefail
model=${1:?usage: bench-engine-worker.sh MODEL [CLIENTS...]}
shift
clients=("$@")
[ ${#clients[@]} -gt 0 ] || clients=(1 2 4 8 16)
tokens=${KVG_BENCH_TOKENS:-64}
calls=${KVG_BENCH_CALLS:-1}
recipe=${KVG_BENCH_RECIPE:-q8-portable-v1}
db=${KVG_BENCH_DB:-kvg_bench}
dir=$(mktemp -d /tmp/kvg-bench-worker.XXXXXX)
trap 'rm -rf "$dir"' EXIT
chmod 755 "$dir"

# A database of its own, made afresh: no audit row of another run counts.
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
psql -X -q -d "$db" -c "CREATE EXTENSION kvg" >/dev/null
# Each client its own prompt, the same in both modes.
cat >"$dir/call.sql" <<SQL
SELECT kvg_generate('Client ' || :client_id || ': once upon a time', $tokens);
SQL
chmod 644 "$dir/call.sql"

last_id() { psql -X -At -d "$db" -c "SELECT coalesce(max(id), 0) FROM kvg.audit"; }
# run MODE CLIENTS: prints "tokens seconds", leaves the run's audit rows after $before.
run() {
  local mode=$1 n=$2 began ended
  began=$(date +%s.%N)
  PGOPTIONS="-c kvg.model=$model -c kvg.recipe=$recipe -c kvg.device=cpu -c kvg.engine=$mode -c kvg.threads=0" \
    pgbench -n -c "$n" -j "$n" -t "$calls" -f "$dir/call.sql" "$db" >"$dir/pgbench.$mode.$n" 2>&1 ||
    { cat "$dir/pgbench.$mode.$n" >&2; exit 1; }
  ended=$(date +%s.%N)
  echo "$(psql -X -At -d "$db" -c "SELECT coalesce(sum(tokens_out), 0) FROM kvg.audit WHERE id > $before
                                    AND operation = 'generate'") $(awk "BEGIN { print $ended - $began }")"
}
# The outputs of a run, one line per call in a stable order.
outputs() {
  psql -X -At -d "$db" -c "SELECT input_sha256 || ' ' || output_sha256 FROM kvg.audit WHERE id > $1 AND id <= $2
                            AND operation = 'generate' ORDER BY 1"
}

# Warm up both: the model mapped in a backend and loaded in the worker.
for mode in backend worker; do
  PGOPTIONS="-c kvg.model=$model -c kvg.recipe=$recipe -c kvg.engine=$mode" psql -X -q -At -d "$db" \
    -c "SELECT length(kvg_generate('warm', 16))" >/dev/null
done

rounds=${KVG_BENCH_ROUNDS:-1}
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf '| clients | backend tok/s | worker tok/s | worker ÷ backend | worker ÷ 1 client in backend | rows per pass | same bytes |\n'
printf '|---:|---:|---:|---:|---:|---:|:---:|\n'
single_backend=
for n in "${clients[@]}"; do
  declare -A rates=([backend]= [worker]=)
  same=yes rows=0 passes=0
  for ((round = 1; round <= rounds; ++round)); do
    for mode in backend worker; do
      before=$(last_id)
      read -r p0 r0 < <(psql -X -At -d "$db" -c "SELECT passes || ' ' || rows_carried FROM kvg_engine_worker()")
      read -r tok sec < <(run "$mode" "$n")
      after=$(last_id)
      outputs "$before" "$after" >"$dir/out.$mode"
      rates[$mode]+=" $(awk "BEGIN { print $tok / $sec }")"
      if [ "$mode" = worker ]; then
        read -r p1 r1 < <(psql -X -At -d "$db" -c "SELECT passes || ' ' || rows_carried FROM kvg_engine_worker()")
        passes=$((passes + p1 - p0)) rows=$((rows + r1 - r0))
      fi
    done
    cmp -s "$dir/out.backend" "$dir/out.worker" || same=NO
  done
  backend=$(median <<<"${rates[backend]}") worker=$(median <<<"${rates[worker]}")
  [ -n "$single_backend" ] || single_backend=$backend
  printf '| %d | %.1f | %.1f | %.2f | %.2f | %.1f | %s |\n' "$n" "$backend" "$worker" \
    "$(awk "BEGIN { print $worker / $backend }")" "$(awk "BEGIN { print $worker / $single_backend }")" \
    "$(awk "BEGIN { print $rows / $passes }")" "$same"
  [ "$rounds" -eq 1 ] || echo "  ($n clients, each round: backend${rates[backend]}; worker${rates[worker]})" >&2
done
