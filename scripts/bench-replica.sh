#!/usr/bin/env bash
# Issue #13's numbers (docs/scale-out.md), on a primary and a hot standby of
# it on this machine (scripts/replica-pair.sh):
#   1. recurring kvg_answer calls per second from 8 pgbench clients against
#      the primary alone, then 4 against the primary and 4 against the
#      standby at the same time (every standby answer audited on the primary);
#   2. the replay lag of a 100 MB artifact: kvg_import on the primary, then
#      how long after its commit the standby has replayed it, and how long
#      kvg_artifact_verify takes there.
# Both servers share this machine's cores, so (2) measures replication's
# cost and (1) the forwarding's, not more cores: on separate machines the
# standby's answers add to the primary's.
#
#   scripts/bench-replica.sh
#   KVG_BENCH_SECONDS=30 KVG_BENCH_CLIENTS=8 KVG_BENCH_MB=100 scripts/bench-replica.sh
#   KVG_MODEL=/path/model.gguf scripts/bench-replica.sh   (a model the server user can read)
#
# Ports KVG_REPLICA_PORT (default KVG_PGPORT + 13) and the next; needs the
# extension installed (scripts/pg-cluster.sh start) and build/cli/kvg.
set -euo pipefail
source "$(dirname "$0")/pg-env.sh"
pport=${KVG_REPLICA_PORT:-$((pg_port + 13))}
pair_dir=$pg_run/replica-bench
pair_db=kvg_bench
source "$repo/scripts/replica-pair.sh"
seconds=${KVG_BENCH_SECONDS:-20}
clients=${KVG_BENCH_CLIENTS:-8}
mb=${KVG_BENCH_MB:-100}
kvg=$repo/${KVG_BUILD_DIR:-build}/cli/kvg
[ -x "$kvg" ] || { echo "no $kvg: run scripts/build.sh kvg first" >&2; exit 1; }
model=${KVG_MODEL:-$(stage_for_server "$repo/tests/data/models/stories260K.gguf" models)}
mkdir -p "$pg_run"
trap pair_remove EXIT

echo "machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), load average" \
  "$(cut -d' ' -f1-3 /proc/loadavg) before the run; primary and standby share it"
echo "model: $model"
pair_create "$model" "max_wal_size = 1GB" >/dev/null
q="What color is the sky?"
p -c "SELECT kvg_learn('$q', 'contains', 'The sky is blue.', 'blue')" >/dev/null
pair_wait_replay

script=$pair_dir/answer.sql
echo "SELECT kvg_answer('$q');" >"$script"
# pgbench PORT CLIENTS [SECONDS]: transactions per second (connection time
# excluded), as replica_alice, one thread per core at most.
pgbench_run() {
  local threads=$(($2 < $(nproc) ? $2 : $(nproc)))
  pgbench -n -h "$pair_dir" -p "$1" -U replica_alice -c "$2" -j "$threads" -T "${3:-$seconds}" -f "$script" "$pair_db" 2>&1
}
bench() {
  pgbench_run "$@" | sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' | xargs printf '%.1f\n'
}
# latency PORT: one client's mean milliseconds per answer.
latency() { pgbench_run "$1" 1 $((seconds / 2)) | sed -n 's/^latency average = \([0-9.]*\) ms/\1/p'; }
rows() { p -c "SELECT count(*) FROM kvg.audit WHERE operation = 'answer'"; }

echo
echo "== recurring kvg_answer, $clients clients, $seconds s each (pgbench)"
bench "$pport" 2 3 >/dev/null  # warm-up: the model in the page cache
before=$(rows)
alone=$(bench "$pport" "$clients")
echo "primary alone:            $alone answers/s ($(($(rows) - before)) audit rows)"
half=$((clients / 2))
before=$(rows)
bench "$pport" "$half" >"$pair_dir/tps.primary" &
bench "$sport" $((clients - half)) >"$pair_dir/tps.standby"
wait
on_primary=$(cat "$pair_dir/tps.primary")
on_standby=$(cat "$pair_dir/tps.standby")
echo "primary + standby:        $(echo "$on_primary + $on_standby" | bc) answers/s" \
  "($on_primary on the primary with $half clients, $on_standby on the standby with $((clients - half));" \
  "$(($(rows) - before)) audit rows, all on the primary)"
echo "the chain verifies: $(p -c 'SELECT (kvg_audit_verify()).ok')"
echo "one client, $((seconds / 2)) s: $(latency "$pport") ms per answer on the primary," \
  "$(latency "$sport") ms on the standby (the difference: forwarding the audit row)"

echo
echo "== replay lag of a $mb MB artifact (kvg_import on the primary, verify => false)"
file=$pg_files/replica-bench.kvga
"$kvg" synth-artifact --bytes $((mb * 1024 * 1024)) --out "$file" >/dev/null 2>&1
server_readable "$file"
pair_wait_replay
start_lsn=$(p -c "SELECT pg_current_wal_lsn()")
t0=$(date +%s%N)
sha=$(p -c "SELECT kvg_import(pg_read_binary_file('$file'), verify => false)")
t1=$(date +%s%N)
end_lsn=$(p -c "SELECT pg_current_wal_lsn()")
until [ "$(s -c "SELECT pg_last_wal_replay_lsn() >= '$end_lsn'::pg_lsn")" = t ]; do sleep 0.01; done
t2=$(date +%s%N)
verified=$(s -c "SET client_min_messages = warning" -c "SELECT (kvg_artifact_verify('$sha')).ok")
t3=$(date +%s%N)
rm -f "$file"
echo "WAL written:              $(p -c "SELECT pg_size_pretty(pg_wal_lsn_diff('$end_lsn', '$start_lsn'))")"
echo "import on the primary:    $(((t1 - t0) / 1000000)) ms (until its commit)"
echo "replayed on the standby:  $(((t2 - t1) / 1000000)) ms after the commit"
echo "verify on the standby:    $verified, $(((t3 - t2) / 1000000)) ms"
