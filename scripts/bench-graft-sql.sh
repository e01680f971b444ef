#!/usr/bin/env bash
# Issue 11, items 4 and 5: a recurring kvg_answer_detail's graft_ms with the
# verified-artifact cache off and on, and the SQL graft (large objects) next
# to the CLI graft of an artifact of the same model and length from a file
# (kvg bench-graft: graft + 1 token, less the token).
#
#   KVG_PGPORT=55449 flock -o /tmp/kvg-pg.lock scripts/bench-graft-sql.sh [MODEL_DIR]
#
# MODEL_DIR (default /work/cache-models) gets a synthetic model with a large
# KV per token (64 KiB: 8 layers x 1024 wide), written once by `kvg synth`;
# the server reads a copy it owns. KVG_BENCH_WORDS sets the entry's solution
# length (default: about 2,000 tokens), KVG_BENCH_REPEAT the answers per
# setting (default 5), KVG_BENCH_THREADS kvg.threads (default 2).
set -euo pipefail
source "$(dirname "$0")/pg-env.sh"
cd "$repo"
kvg=$repo/build/cli/kvg
[ -x "$kvg" ] || { echo "no $kvg: run scripts/build.sh kvg first" >&2; exit 1; }
models=${1:-/work/cache-models}
words=${KVG_BENCH_WORDS:-680}
repeat=${KVG_BENCH_REPEAT:-5}
threads=${KVG_BENCH_THREADS:-2}

mkdir -p "$models"
model=$models/kv64k-l8-e1024.gguf
[ -f "$model" ] || "$kvg" synth --out "$model" --n-embd 1024 --n-layer 8 --n-head 16 --n-ff 1024 --vocab 512 \
  --n-ctx 4096 --seed 11 >/dev/null
"$repo/scripts/pg-cluster.sh" start >/dev/null
served=$(stage_for_server "$model" bench-models)

db=kvg_bench_graft_sql
PGOPTIONS='-c client_min_messages=warning' psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" \
  -c "CREATE DATABASE $db" >/dev/null
psql -X -q -d "$db" -c "CREATE EXTENSION kvg" >/dev/null
solution=$(for i in $(seq 1 "$words"); do printf 'w%d ' $((i % 97)); done)
psql -X -q -d "$db" -v ON_ERROR_STOP=1 -v model="$served" -v solution="$solution" -o /dev/null <<SQL
SET kvg.model = :'model';
SET kvg.threads = $threads;
SELECT kvg_learn('What is the bench question?', 'contains', :'solution', 'w1');
SQL

# One backend: the cache is per backend. The first answer with the cache on
# reads and hashes the entry (a miss); the later ones are the recurring case.
answer() {  # answer LABEL: one recurring answer, one statement
  echo "SELECT '$1', tokens_grafted, graft_ms FROM kvg_answer_detail('What is the bench question?', 1);"
}
runs=$({
  echo "SET kvg.model = '$served'; SET kvg.threads = $threads; SET kvg.artifact_cache_memory = 0;"
  for _ in $(seq 1 "$repeat"); do answer off; done
  echo "SET kvg.artifact_cache_memory = '1GB';"
  for _ in $(seq 0 "$repeat"); do answer on; done
  echo "SELECT 'stats', (SELECT to_jsonb(c)::text FROM kvg.artifact_cache c), 0;"
} | psql -X -At -q -d "$db" -v ON_ERROR_STOP=1)
tokens=$(echo "$runs" | awk -F'|' '$1 == "off" { print $2; exit }')
bytes=$(psql -X -At -d "$db" -c "SELECT sum(a.bytes) FROM kvg.artifacts a")
cli=$("$kvg" bench-graft --model "$model" --lengths "$tokens" --threads "$threads" --repeat 3 --json 2>/dev/null)
cli_graft=$(echo "$cli" | python3 -c 'import json, sys; r = json.load(sys.stdin)["rows"][0]; print(r["graft_ms"] - r["decode_ms"], r["verify_ms"], r["read_ms"], r["capture_ms"], r["recompute_ms"])')
python3 - "$tokens" "$bytes" "$cli_graft" <<PY
import statistics, sys
tokens, nbytes, cli = sys.argv[1], int(sys.argv[2]), [float(x) for x in sys.argv[3].split()]
runs = """$runs""".splitlines()
off = [float(l.split("|")[2]) for l in runs if l.startswith("off|")]
on = [float(l.split("|")[2]) for l in runs if l.startswith("on|")]
stats = [l.split("|")[1] for l in runs if l.startswith("stats|")][0]
med = statistics.median
print(f"model  $model (8 layers x 1024, 64 KiB of KV per token), kvg.threads $threads")
print(f"entry  {tokens} tokens grafted, {nbytes / 1e6:.1f} MB of artifacts stored; graft_ms is kvg_answer_detail's")
print()
print("| graft of the recurring entry | median ms | min ms | runs |")
print("|---|---:|---:|---:|")
print(f"| SQL, cache off (read large object + hash) | {med(off):.1f} | {min(off):.1f} | {len(off)} |")
print(f"| SQL, cache on, first answer (miss: read + hash + keep) | {on[0]:.1f} | {on[0]:.1f} | 1 |")
print(f"| SQL, cache on, recurring (hit) | {med(on[1:]):.1f} | {min(on[1:]):.1f} | {len(on) - 1} |")
print(f"| CLI bench-graft from a file, same model and length (graft only) | {cli[0]:.1f} | {cli[0]:.1f} | best of 3 |")
print()
print(f"SQL cache off / CLI: {med(off) / cli[0]:.2f}x; SQL cache on / CLI: {med(on[1:]) / cli[0]:.2f}x;"
      f" cache off / on: {med(off) / med(on[1:]):.1f}x")
print(f"CLI split: verify {cli[1]:.1f} ms, read {cli[2]:.1f} ms; capture (prefill + write) {cli[3]:.1f} ms,"
      f" recompute {cli[4]:.1f} ms")
print(f"cache: {stats}")
PY
