#!/usr/bin/env bash
# Do backends share the model's pages? (not part of the test command)
# For each count N (default 1 and 8): N sessions each run one kvg_generate
# (which maps the model and reads every page: the fingerprint hashes the whole
# file) and then sit in pg_sleep; meanwhile every backend's /proc/PID/smaps is
# read. Per backend it prints the model mapping's Rss, Pss, Shared and Private
# pages and the whole backend's Rss, Pss and Private (smaps_rollup). Shared
# pages: the model's Pss is about its size / N and its Private is 0 for N > 1
# (smaps counts a page mapped by one process only as private, so with N = 1
# the mapped file shows as Private_Clean). A model copied into private memory
# would show Private ≈ its size in every backend whatever N.
#   KVG_PGPORT=55501 flock /tmp/kvg-pg.lock scripts/bench-memory.sh MODEL.gguf [N...]
# A large model shows it best: kvg synth --n-embd 1024 --n-layer 4 --n-head 16
# --vocab 512 --out /tmp/synth-200M.gguf (about 200 MB of f32 weights).
set -uo pipefail
source "$(dirname "$0")/pg-env.sh"
cd "$repo"
[ $# -ge 1 ] && [ -f "$1" ] || { echo "usage: bench-memory.sh MODEL.gguf [N...]" >&2; exit 2; }
source_model=$1
shift
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(1 8)
"$repo/scripts/pg-cluster.sh" start >/dev/null || exit 1
model=$(stage_for_server "$source_model" memory-models) || exit 1
model_mb=$(($(stat -c %s "$model") / 1048576))
db=kvg_memory
PGOPTIONS='-c client_min_messages=warning' psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" || exit 1
q() { psql -X -At -v ON_ERROR_STOP=1 -d $db -c "$1"; }
q "CREATE EXTENSION kvg" >/dev/null
q "ALTER DATABASE $db SET kvg.model = '$model'" >/dev/null
q "ALTER DATABASE $db SET kvg.device = 'cpu'" >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# smaps_of PID: kB of the model mapping (Rss Pss Shared Private), then of the
# whole process (Rss Pss Private).
smaps_of() {
  awk -v model="$model" '
    /^[0-9a-f]+-[0-9a-f]+ / { in_model = ($6 == model); next }
    in_model && /^Rss:/ { rss += $2 }
    in_model && /^Pss:/ { pss += $2 }
    in_model && /^Shared_(Clean|Dirty):/ { shared += $2 }
    in_model && /^Private_(Clean|Dirty):/ { private += $2 }
    END { printf "%d %d %d %d", rss, pss, shared, private }' "/proc/$1/smaps"
  awk '/^Rss:/ { rss = $2 } /^Pss:/ { pss = $2 } /^Private_(Clean|Dirty):/ { private += $2 }
       END { printf " %d %d %d\n", rss, pss, private }' "/proc/$1/smaps_rollup"
}
mb() { awk -v kb="$1" 'BEGIN { printf "%.1f", kb / 1024 }'; }

echo "model: $model ($model_mb MB)"
echo
echo "| backends | backend | model Rss MB | model Pss MB | model Shared MB | model Private MB | backend Rss MB | backend Pss MB | backend Private MB |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
status=0
for n in "${counts[@]}"; do
  for i in $(seq 1 "$n"); do
    psql -X -q -d $db -c "SELECT kvg_generate('Once upon a time', 1)" -c "SELECT pg_sleep(600)" \
      >/dev/null 2>"$out/client-$i.err" &
  done
  pids=""
  for _ in $(seq 1 600); do
    pids=$(q "SELECT pid FROM pg_stat_activity WHERE datname = '$db' AND state = 'active'
              AND query = 'SELECT pg_sleep(600)' ORDER BY pid")
    [ "$(echo $pids | wc -w)" = "$n" ] && break
    sleep 0.5
  done
  if [ "$(echo $pids | wc -w)" != "$n" ]; then
    echo "only $(echo $pids | wc -w) of $n sessions loaded the model:"; cat "$out"/client-*.err; status=1
  fi
  totals=(0 0 0 0 0 0 0)
  for p in $pids; do
    read -r -a v <<<"$(smaps_of "$p")"
    printf '| %d | %d | %s | %s | %s | %s | %s | %s | %s |\n' "$n" "$p" "$(mb "${v[0]}")" "$(mb "${v[1]}")" \
      "$(mb "${v[2]}")" "$(mb "${v[3]}")" "$(mb "${v[4]}")" "$(mb "${v[5]}")" "$(mb "${v[6]}")"
    for k in 0 1 2 3 4 5 6; do totals[$k]=$((totals[k] + v[k])); done
  done
  printf '| %d | **sum** | %s | %s | %s | %s | %s | %s | %s |\n' "$n" "$(mb "${totals[0]}")" "$(mb "${totals[1]}")" \
    "$(mb "${totals[2]}")" "$(mb "${totals[3]}")" "$(mb "${totals[4]}")" "$(mb "${totals[5]}")" "$(mb "${totals[6]}")"
  for p in $pids; do q "SELECT pg_cancel_backend($p)" >/dev/null; done
  wait
done
echo
echo "Pss sums to the memory really used: the model's Pss over N backends sums to about its size once when its pages are shared."
exit $status
