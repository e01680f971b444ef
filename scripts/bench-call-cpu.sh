#!/usr/bin/env bash
# Where a call's CPU goes: concurrent SQL clients run one short generation
# each, over and over (pgbench), in each engine mode, on one running
# cluster; for each run, calls a second and the CPU time a call of the
# whole machine (/proc/stat), of the engine worker and of the audit writers
# (/proc/<pid>/stat: utime + stime), and the share of the machine left idle.
# A table row per run: a process whose share of a call shrinks, or idle time
# that one mode leaves and the other does not, is read off here
# (docs/engine-worker.md, "The statements around a call").
#
#   scripts/bench-call-cpu.sh MODEL [CLIENTS...]   (default 8 16)
#
# MODEL is a path the server reads. Environment: KVG_BENCH_TOKENS (decoded
# per call, default 24), KVG_BENCH_CALLS (calls per client, default 500),
# KVG_BENCH_ROUNDS (default 2: rounds of one backend run then one worker
# run for each number of clients), KVG_BENCH_RECIPE (default
# q8-portable-v1), KVG_BENCH_DB (default kvg_bench_cpu, dropped and
# created), PGHOST/PGPORT/PGUSER (scripts/pg-cluster.sh prints them).
# Runs on the machine the server runs on (it reads /proc). Figures, not a
# test; the machine's own noise moves them, so compare rows of one run.
set -euo pipefail
model=${1:?usage: bench-call-cpu.sh MODEL [CLIENTS...]}
shift
clients=("$@")
[ ${#clients[@]} -gt 0 ] || clients=(8 16)
tokens=${KVG_BENCH_TOKENS:-24}
calls=${KVG_BENCH_CALLS:-500}
rounds=${KVG_BENCH_ROUNDS:-2}
recipe=${KVG_BENCH_RECIPE:-q8-portable-v1}
db=${KVG_BENCH_DB:-kvg_bench_cpu}
dir=$(mktemp -d /tmp/kvg-bench-cpu.XXXXXX)
trap 'rm -rf "$dir"' EXIT
chmod 755 "$dir"

PGOPTIONS="-c client_min_messages=warning" psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" \
  -c "CREATE DATABASE $db" >/dev/null
psql -X -q -d "$db" -c "CREATE EXTENSION kvg" >/dev/null
cat >"$dir/call.sql" <<SQL
SELECT kvg_generate('Client ' || :client_id || ': once upon a time', $tokens);
SQL
chmod 644 "$dir/call.sql"

options() { echo "-c kvg.model=$model -c kvg.recipe=$recipe -c kvg.device=cpu -c kvg.engine=$1 -c kvg.threads=0"; }
# Warm up both modes: the model mapped in a backend and loaded in the worker,
# and this database's audit writer started.
for mode in backend worker; do
  PGOPTIONS=$(options $mode) psql -X -q -At -d "$db" -c "SELECT length(kvg_generate('warm', 4))" >/dev/null
done

# CPU ticks (USER_HZ) of processes, summed; a process gone meanwhile counts 0.
ticks_of() {
  local sum=0 pid
  for pid in "$@"; do
    [ -r "/proc/$pid/stat" ] && sum=$((sum + $(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null || echo 0)))
  done
  echo "$sum"
}
# The machine's busy and idle ticks.
machine() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $5 + $6 }' /proc/stat; }

hz=$(getconf CLK_TCK)
printf '| round | mode | clients | calls/s | CPU ms a call | engine worker | audit writers | machine idle |\n'
printf '|---:|---|---:|---:|---:|---:|---:|---:|\n'
for ((round = 1; round <= rounds; ++round)); do
  for n in "${clients[@]}"; do
    for mode in backend worker; do
      worker=$(psql -X -At -d "$db" -c "SELECT pid FROM kvg_engine_worker()")
      writers=$(psql -X -At -d "$db" -c "SELECT pid FROM kvg_audit_writers() WHERE pid IS NOT NULL")
      read -r busy0 idle0 < <(machine)
      w0=$(ticks_of $worker) a0=$(ticks_of $writers) began=$(date +%s.%N)
      PGOPTIONS=$(options $mode) pgbench -n -c "$n" -j "$n" -t "$calls" -f "$dir/call.sql" "$db" \
        >"$dir/pgbench" 2>&1 || { cat "$dir/pgbench" >&2; exit 1; }
      ended=$(date +%s.%N)
      read -r busy1 idle1 < <(machine)
      w1=$(ticks_of $worker) a1=$(ticks_of $writers)
      awk -v r="$round" -v m="$mode" -v n="$n" -v c=$((n * calls)) -v s="$(awk "BEGIN { print $ended - $began }")" \
        -v hz="$hz" -v busy=$((busy1 - busy0)) -v idle=$((idle1 - idle0)) -v w=$((w1 - w0)) -v a=$((a1 - a0)) \
        'BEGIN { ms = 1000 / hz / c
                 printf "| %d | %s | %d | %.0f | %.3f | %s | %.3f | %.0f %% |\n", r, m, n, c / s, busy * ms,
                        m == "worker" ? sprintf("%.3f", w * ms) : "-", a * ms, 100 * idle / (busy + idle) }'
    done
  done
done
