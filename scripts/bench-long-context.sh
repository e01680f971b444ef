#!/usr/bin/env bash
# Context beyond memory, from SQL (docs/long-context.md, "Mapped chains in
# the server"): builds one long stored chain with kvg_capture, link by link,
# on a synthetic model whose context_length is the longest length asked for;
# then, at each length (a link's end), asks a 16-token question after the
# chain and decodes, three ways in one run:
#   mapped    kvg.engine = worker: the worker attends the chain in place from
#             its KV files, under kvg.max_kv_memory = KVG_BENCH_KV_BOUND
#   bounded   kvg.engine = backend under the same bound: the backend copies
#             the chain into its cache, so it is refused once the chain's KV
#             outgrows the bound
#   resident  kvg.engine = backend, unbounded: the chain copied (the bytes
#             to compare with)
# and prints a table: the chain's KV size, each way's call time and decode
# rate, the engine worker's memory growth while it ran the mapped call
# (anonymous: its own; file: the mapped KV files' page-cache pages), and
# whether the mapped text is the resident text. Times are taken in the
# server (clock_timestamp), one run; read the ratios, not the seconds.
#
#   scripts/bench-long-context.sh [LENGTH...]   (default 8192 32768 131072 262144)
#
# LENGTHs are multiples of the link size. Environment: KVG_BENCH_LINK
# (tokens per link, default 4096), KVG_BENCH_DECODE (decoded tokens, default
# 64), KVG_BENCH_KV_BOUND (default 64MB), KVG_BENCH_RECIPE (default
# f32-portable-v1; e.g. f32-portable-v1+kv-i8), KVG_BENCH_DB (default
# kvg_bench_long), PGHOST/PGPORT/PGUSER: a superuser of a cluster where kvg
# is preloaded (scripts/pg-cluster.sh's), on this machine (the worker's
# memory is read from /proc).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
lengths=("$@")
[ ${#lengths[@]} -gt 0 ] || lengths=(8192 32768 131072 262144)
link=${KVG_BENCH_LINK:-4096}
decode=${KVG_BENCH_DECODE:-64}
bound=${KVG_BENCH_KV_BOUND:-64MB}
recipe=${KVG_BENCH_RECIPE:-f32-portable-v1}
db=${KVG_BENCH_DB:-kvg_bench_long}
longest=0
for n in "${lengths[@]}"; do
  [ $((n % link)) = 0 ] || { echo "length $n is not a multiple of the link size $link" >&2; exit 2; }
  [ "$n" -gt "$longest" ] && longest=$n
done
kvg=${KVG_BIN:-$repo/build/cli/kvg}
dir=$(mktemp -d /tmp/kvg-bench-long.XXXXXX)
chmod 755 "$dir"
trap 'rm -rf "$dir"' EXIT

# head_dim 64, one KV head, two layers: 1 KiB of fp32 KV per position, so
# 262,144 positions are 256 MiB; one query head keeps the prefill's
# attention (quadratic in the context) within reach of a small machine.
model=$dir/long.gguf
"$kvg" synth --out "$model" --seed 5 --n-embd 64 --n-layer 2 --n-head 1 --n-head-kv 1 --vocab 512 \
  --n-ctx $((longest + 32 + decode)) >/dev/null
chmod 644 "$model"
q() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" "$@"; }
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
q -c "CREATE EXTENSION kvg" >/dev/null
settings="SET kvg.model = '$model'; SET kvg.device = cpu; SET kvg.recipe = '$recipe'; SET kvg.prefix_reuse = off;"
# The story: seeded token ids (BOS first), the same in every session.
q -c "CREATE TABLE story AS SELECT i, CASE WHEN i = 1 THEN 1 ELSE 3 + (i * 7919 + i / 13) % 509 END AS id
      FROM generate_series(1, $longest + 16) i" \
  -c "CREATE FUNCTION tokens(a int, b int) RETURNS int[] LANGUAGE sql STABLE
        RETURN ARRAY(SELECT id FROM story WHERE i BETWEEN a AND b ORDER BY i)" \
  -c "CREATE TABLE chain (ends int PRIMARY KEY, sha text, ms double precision)" >/dev/null
# One call, timed in the server: its milliseconds and its text's md5, or the error.
q -c "CREATE FUNCTION timed_generate(prompt int[], n int, leaf text, OUT ms double precision, OUT result text)
      LANGUAGE plpgsql AS \$\$
      DECLARE t0 timestamptz := clock_timestamp(); answer text;
      BEGIN
        answer := kvg_generate(prompt, n, leaf);
        ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
        result := md5(answer);
      EXCEPTION WHEN OTHERS THEN
        ms := NULL;
        result := SQLSTATE || ' ' || SQLERRM;
      END \$\$" >/dev/null

# The chain, link by link: each capture grafts the chain so far and
# prefills the next link after it. In a backend, resident, as the figures in
# docs/long-context.md were measured (in worker mode a capture attends the
# chain in place, like the mapped calls below).
started=$(date +%s.%N)
parent=""
for ((end = link; end <= longest; end += link)); do
  from=$((end - link + 1))
  q -c "$settings SET kvg.engine = backend; SET kvg.max_kv_memory = 0;" \
    -c "INSERT INTO chain SELECT $end, kvg_capture(tokens($from, $end), NULLIF('$parent', '')), 0" >/dev/null
  parent=$(q -c "SELECT sha FROM chain WHERE ends = $end")
done
built=$(printf '%.1f' "$(echo "$(date +%s.%N) - $started" | bc)")

worker_pid=$(q -c "SELECT pid FROM kvg_engine_worker()")
kib() { awk -v k="$2" '$1 == k":" { print $2 }' "/proc/$1/status"; }
# call ENGINE BOUND LENGTH N: "ms|md5-or-error" of one generation after the chain's link ending at LENGTH.
call() {
  q -c "$settings SET kvg.engine = $1; SET kvg.max_kv_memory = '$2';" \
    -c "SELECT ms, result FROM timed_generate(tokens($3 + 1, $3 + 16), $4, (SELECT sha FROM chain WHERE ends = $3))"
}
# The mapped call of N tokens, with the worker's peak growth (anonymous, file) in MiB while it ran.
mapped_call() {
  local anon0 file0 peak_anon=0 peak_file=0 pid
  anon0=$(kib "$worker_pid" RssAnon)
  file0=$(kib "$worker_pid" RssFile)
  call worker "$bound" "$1" "$2" >"$dir/mapped" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    local a f
    a=$(kib "$worker_pid" RssAnon)
    f=$(kib "$worker_pid" RssFile)
    [ $((a - anon0)) -gt "$peak_anon" ] && peak_anon=$((a - anon0))
    [ $((f - file0)) -gt "$peak_file" ] && peak_file=$((f - file0))
    sleep 0.02
  done
  wait "$pid"
  echo "$(cat "$dir/mapped")|$(echo "scale=1; $peak_anon / 1024" | bc)|$(echo "scale=1; $peak_file / 1024" | bc)"
}
rate() {  # tokens/s of the decode: (N - 1) tokens in the time N tokens take beyond 1
  if [ -z "$1" ] || [ -z "$2" ]; then echo "-"; else echo "scale=1; ($decode - 1) * 1000 / ($2 - $1)" | bc; fi
}

echo "context beyond memory from SQL: synth 64x2 (1 query head, 1 KV head, head_dim 64), recipe $recipe, links of $link tokens,"
echo "a 16-token question and $decode decoded tokens, kvg.max_kv_memory = $bound for mapped and bounded; chain of $longest tokens built in $built s"
printf '%8s %8s | %9s %9s %8s %8s | %18s | %9s %9s | %6s\n' context "KV MiB" "map ms" "map tok/s" "anon MiB" "file MiB" "bounded" "res ms" "res tok/s" exact
for n in "${lengths[@]}"; do
  kv_mib=$(q -c "SELECT round(sum(bytes) / 1048576.0, 1) FROM kvg.artifacts WHERE sha256 IN (SELECT sha FROM chain WHERE ends <= $n)")
  # Each way's first call at this length reads what it has not read yet
  # (the worker writes its KV files, a backend reads the large objects):
  # the calls of 1 token are made twice, and the second is timed.
  mapped_call "$n" 1 >/dev/null
  IFS='|' read -r map1 _ _ _ <<<"$(mapped_call "$n" 1)"
  IFS='|' read -r map_ms map_out anon file <<<"$(mapped_call "$n" "$decode")"
  IFS='|' read -r bounded_ms bounded_out <<<"$(call backend "$bound" "$n" "$decode")"
  call backend 0 "$n" 1 >/dev/null
  IFS='|' read -r res1 _ <<<"$(call backend 0 "$n" 1)"
  IFS='|' read -r res_ms res_out <<<"$(call backend 0 "$n" "$decode")"
  if [ -n "$bounded_ms" ]; then bounded="ran ${bounded_ms%.*} ms"; else bounded="refused ${bounded_out%% *}"; fi
  exact=no
  [ -n "$map_ms" ] && [ "$map_out" = "$res_out" ] && exact=yes
  printf '%8s %8s | %9.0f %9s %8s %8s | %18s | %9.0f %9s | %6s\n' "$n" "$kv_mib" "${map_ms:-0}" "$(rate "$map1" "$map_ms")" \
    "$anon" "$file" "$bounded" "${res_ms:-0}" "$(rate "$res1" "$res_ms")" "$exact"
  [ -n "$map_ms" ] || echo "   mapped failed: $map_out"
done
echo "(map: in the worker, the chain attended from its KV files; bounded: in a backend under the same bound, which"
echo " copies the chain; res: in a backend, unbounded. tok/s: the decode's rate, from the calls of 1 and $decode tokens."
echo " anon, file: the worker's growth in anonymous and file-backed memory while the mapped call ran (file: the"
echo " KV files' page-cache pages, shared and evictable). exact: the mapped text is the resident text.)"
