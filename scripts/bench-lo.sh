#!/usr/bin/env bash
# Issue #4's measurement: large-object write and read throughput for artifacts
# from 1 MiB to 1000 MiB against plain file I/O on the same disk, and grafting a
# long prefix from its large object against recomputing it.
#
#   scripts/bench-lo.sh
#   KVG_BENCH_LO_SIZES="1 16" KVG_BENCH_LO_FSYNC_SIZE=1 scripts/bench-lo.sh   # sizes in MiB, quicker
#
# Needs build/cli/kvg (scripts/build.sh) and the stories260K model
# (tests/data/models/stories260K.gguf, or KVG_MODEL=path). Starts the private
# cluster (scripts/pg-cluster.sh), works in a scratch database it drops at the
# end, and takes a few minutes on a 2-core machine.
#
# What is timed (every time from the server's clock, from the statement
# before to the statement after, so the commit is included):
#   LO write    SELECT kvg_import(pg_read_binary_file(f)) minus
#               SELECT length(pg_read_binary_file(f)): storing the bytes
#               (codec validation, SHA-256 twice, 4 MiB lo_write calls,
#               catalog row, audit row) without reading the file
#   LO read     SELECT kvg_artifact_verify(sha): reads the large object in
#               4 MiB chunks, re-hashes and re-validates it; after the OS page
#               cache of pg_largeobject (table and index) is dropped
#   file write  dd bs=4M conv=fsync of the artifact to a new file
#   file read   dd bs=4M of that file after its OS page cache is dropped
# Page caches are dropped per file (sync FILE, then dd iflag=nocache count=0,
# i.e. POSIX_FADV_DONTNEED); PostgreSQL's own shared_buffers are not, so a
# large object that fits in them (64 MB here) is read partly or wholly from
# there. A second table shows the parts: PostgreSQL's own large-object calls
# without kvg (lo_from_bytea, lo_get), writes without fsync, cached reads.
set -euo pipefail
source "$(dirname "$0")/pg-env.sh"
cd "$repo"

kvg=$repo/build/cli/kvg
model=${KVG_MODEL:-$repo/tests/data/models/stories260K.gguf}
db=kvg_bench_lo
mib=1048576
# 1000 MiB rather than 1 GiB: a bytea (pg_read_binary_file, kvg_import's
# argument) holds less than 1 GiB. synth-artifact lands within 1% of each.
# KVG_BENCH_LO_SIZES="1 16" and KVG_BENCH_LO_FSYNC_SIZE=1 (or empty) run less.
read -r -a sizes <<<"${KVG_BENCH_LO_SIZES:-1 16 256 1000}"
fsync_on_size=${KVG_BENCH_LO_FSYNC_SIZE-256}

[ -d "$repo/build" ] && cmake --build "$repo/build" --target kvg >/dev/null
[ -x "$kvg" ] || { echo "no $kvg: run scripts/build.sh first" >&2; exit 1; }
[ -f "$model" ] || { echo "no model at $model: set KVG_MODEL=/path/to/stories260K.gguf" >&2; exit 1; }
model=$(realpath "$model")

"$repo/scripts/pg-cluster.sh" start >/dev/null
server_model=$(stage_for_server "$model" models)  # a copy the server can read
# The server reads the artifacts (pg_read_binary_file): work where it can.
work=$(mktemp -d "$pg_files/bench-lo.XXXXXX")
server_readable "$work"
fsync_changed=0
cleanup() {
  if [ "$fsync_changed" = 1 ]; then
    psql -X -q -d postgres -c "ALTER SYSTEM RESET fsync" -c "SELECT pg_reload_conf()" >/dev/null || true
  fi
  psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db" >/dev/null 2>&1
psql -X -q -d "$db" -c "SET client_min_messages = warning" -c "CREATE EXTENSION kvg"

# One psql session in the scratch database; SQL on stdin.
q() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" "$@"; }
tic='SELECT extract(epoch FROM clock_timestamp()) AS t0 \gset'
toc() { echo "SELECT extract(epoch FROM clock_timestamp()) - :t0 AS $1 \\gset"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.6f", b - a }'; }
min() { printf '%s\n' "$@" | sort -g | head -1; }
mbps() { awk -v n="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.0f", n / s / 1e6; else printf "n/a" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "n/a" && b > 0) printf "%.2f", a / b; else printf "n/a" }'; }
# dd's own elapsed time (from its start to its last write, the fsync of
# conv=fsync included), so that starting the process is not timed.
dd_seconds() {
  local secs
  secs=$(LC_ALL=C dd "$@" 2>&1 >/dev/null | awk '/ copied, / { for (i = 1; i < NF; i++) if ($(i + 1) == "s,") print $i }')
  [ -n "$secs" ] || { echo "could not read dd's time for: dd $*" >&2; exit 1; }
  echo "$secs"
}
drop_file_cache() {
  local f
  for f in "$@"; do
    [ -f "$f" ] || continue
    sync "$f"
    dd if="$f" iflag=nocache count=0 status=none
  done
}
read -r lo_rel lo_idx < <(q -F ' ' -c "SELECT pg_relation_filepath('pg_largeobject'), \
  pg_relation_filepath('pg_largeobject_loid_pn_index')")
drop_lo_cache() {
  drop_file_cache "$pg_data/$lo_rel" "$pg_data/$lo_rel".* "$pg_data/$lo_idx" "$pg_data/$lo_idx".*
}
if [ "$(stat -c %d "$work")" != "$(stat -c %d "$pg_data")" ]; then
  echo "warning: $work and $pg_data are on different filesystems" >&2
fi

# A small artifact stored once: every timed session first imports (a
# duplicate: written, then dropped) and verifies it, so that loading kvg.so,
# the catalog caches and SPI plans are not timed.
"$kvg" synth-artifact --bytes 65536 --seed 99 --out "$work/warm.kvga" 2>/dev/null >"$work/warm.sha"
warm_sha=$(tail -1 "$work/warm.sha")
q -c "SELECT kvg_import(pg_read_binary_file('$work/warm.kvga'))" >/dev/null
warmup="SELECT kvg_import(pg_read_binary_file('$work/warm.kvga')) AS w \\gset
SELECT kvg_artifact_verify('$warm_sha') AS w \\gset
SELECT length(lo_get(loid)) AS w FROM kvg.artifacts WHERE sha256 = '$warm_sha' \\gset"

# measure_size MIB REPEATS SESSION_SQL: prints one result line
#   bytes lo_write_s lo_raw_write_s file_write_s file_write_nosync_s lo_read_s lo_read_cached_s lo_raw_read_s
#   file_read_s file_read_cached_s fsync_setting
measure_size() {
  local size_mib=$1 repeats=$2 session_sql=$3
  local art=$work/a${size_mib}.kvga copy=$work/copy.bin
  local sha bytes rep
  sha=$("$kvg" synth-artifact --bytes $((size_mib * mib)) --seed "$size_mib" --out "$art" 2>/dev/null | tail -1)
  bytes=$(stat -c %s "$art")
  local t_len=() t_imp=() t_raw=() t_fw=() t_fwn=() t_ver=() t_verw=() t_get=() t_fr=() t_frw=()
  local fsync_setting=""
  for ((rep = 0; rep < repeats; rep++)); do
    cat "$art" >/dev/null  # the file read subtracted below comes from the page cache
    local out
    out=$(q -v f="$art" <<SQL
$session_sql
$warmup
SELECT current_setting('fsync') AS fs \gset
$tic
SELECT length(pg_read_binary_file(:'f')) AS n \gset
$(toc t_len)
$tic
SELECT kvg_import(pg_read_binary_file(:'f')) AS sha \gset
$(toc t_imp)
$tic
SELECT lo_from_bytea(0, pg_read_binary_file(:'f')) AS loid \gset
$(toc t_raw)
\echo :t_len :t_imp :t_raw :sha :loid :fs
SQL
)
    local len imp raw got loid
    read -r len imp raw got loid fsync_setting <<<"$out"
    [ "$got" = "$sha" ] || { echo "kvg_import returned $got, synth-artifact said $sha" >&2; exit 1; }
    t_len+=("$len") t_imp+=("$imp") t_raw+=("$raw")

    drop_lo_cache
    out=$(q -v sha="$sha" <<SQL
$warmup
$tic
SELECT kvg_artifact_verify(:'sha') AS ok \gset
$(toc t_ver)
$tic
SELECT kvg_artifact_verify(:'sha') AS ok2 \gset
$(toc t_verw)
\echo :t_ver :t_verw :ok :ok2
SQL
)
    local ver verw ok ok2
    read -r ver verw ok ok2 <<<"$out"
    [ "$ok$ok2" = tt ] || { echo "kvg_artifact_verify($sha) was not true" >&2; exit 1; }
    t_ver+=("$ver") t_verw+=("$verw")

    drop_lo_cache
    out=$(q -v loid="$loid" <<SQL
$warmup
$tic
SELECT length(lo_get(:loid)) AS n \gset
$(toc t_get)
\echo :t_get :n
SQL
)
    local get n
    read -r get n <<<"$out"
    [ "$n" = "$bytes" ] || { echo "lo_get returned $n bytes, not $bytes" >&2; exit 1; }
    t_get+=("$get")
    q -v sha="$sha" -v loid="$loid" >/dev/null <<SQL
DELETE FROM kvg.artifacts WHERE sha256 = :'sha';
SELECT lo_unlink(:loid);
VACUUM pg_largeobject;
SQL

    rm -f "$copy"
    t_fw+=("$(dd_seconds if="$art" of="$copy" bs=4M conv=fsync)")
    drop_file_cache "$copy"
    t_fr+=("$(dd_seconds if="$copy" of=/dev/null bs=4M)")
    t_frw+=("$(dd_seconds if="$copy" of=/dev/null bs=4M)")
    rm -f "$copy"
    t_fwn+=("$(dd_seconds if="$art" of="$copy" bs=4M)")
    sync "$copy"
    rm -f "$copy"
  done
  rm -f "$art"
  local lo_w
  lo_w=$(awk -v a="$(min "${t_imp[@]}")" -v b="$(min "${t_len[@]}")" 'BEGIN { printf "%.6f", a - b }')
  local lo_raw_w
  lo_raw_w=$(awk -v a="$(min "${t_raw[@]}")" -v b="$(min "${t_len[@]}")" 'BEGIN { printf "%.6f", a - b }')
  echo "$bytes $lo_w $lo_raw_w $(min "${t_fw[@]}") $(min "${t_fwn[@]}") $(min "${t_ver[@]}") $(min "${t_verw[@]}")" \
    "$(min "${t_get[@]}") $(min "${t_fr[@]}") $(min "${t_frw[@]}") $fsync_setting"
}

echo "command: scripts/bench-lo.sh"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) memory;" \
  "artifacts and .pgdata on $(df --output=source,fstype "$pg_data" | tail -1 | tr -s ' ')"
echo "server: $(q -c 'SELECT version()' | cut -d' ' -f1-2), shared_buffers $(q -c 'SHOW shared_buffers')," \
  "fsync $(q -c 'SHOW fsync'), synchronous_commit $(q -c 'SHOW synchronous_commit')," \
  "full_page_writes $(q -c 'SHOW full_page_writes')"
echo
started=$(now)
results=()
for s in "${sizes[@]}"; do
  reps=3
  [ "$s" -gt 256 ] && reps=1
  line=$(measure_size "$s" "$reps" "")
  results+=("$s $reps $line")
done
if [ -n "$fsync_on_size" ]; then
  # The cluster runs with fsync off; one row with it on (restored on exit).
  fsync_changed=1
  psql -X -q -d postgres -c "ALTER SYSTEM SET fsync = on" -c "SELECT pg_reload_conf()" >/dev/null
  sleep 1
  line=$(measure_size "$fsync_on_size" 3 "SET synchronous_commit = on;")
  results+=("$fsync_on_size 3 $line")
  psql -X -q -d postgres -c "ALTER SYSTEM RESET fsync" -c "SELECT pg_reload_conf()" >/dev/null
  fsync_changed=0
fi

echo "Large objects vs plain files (MB/s = 10^6 bytes/s; best of 3, one run for 1000 MiB; ratio = LO / file)."
echo "The test cluster runs with fsync=off, synchronous_commit=off, full_page_writes=off (scripts/pg-cluster.sh);"
echo "the row marked fsync=on ran with fsync=on and synchronous_commit=on (the commit waits for the WAL flush)."
echo "LO write: kvg_import minus pg_read_binary_file alone; LO read: kvg_artifact_verify (re-hash) after dropping"
echo "pg_largeobject's OS page cache (shared_buffers, 64 MB, may still hold part of it, all of it up to 16 MiB)."
echo "File write: dd bs=4M conv=fsync of the same bytes to a new file on the same disk; file read: dd bs=4M of"
echo "that file after dropping its OS page cache (sync FILE; dd iflag=nocache count=0); times as dd reports them."
echo
echo "| size | bytes | LO write MB/s | file write MB/s | ratio | LO read MB/s | file read MB/s | ratio |"
echo "|------|------:|--------------:|----------------:|------:|-------------:|---------------:|------:|"
for r in "${results[@]}"; do
  read -r s reps bytes lo_w lo_raw_w fw fwn ver verw get fr frw fs <<<"$r"
  label="$s MiB"
  [ "$fs" = on ] && label="$s MiB, fsync=on"
  a=$(mbps "$bytes" "$lo_w") b=$(mbps "$bytes" "$fw") c=$(mbps "$bytes" "$ver") d=$(mbps "$bytes" "$fr")
  echo "| $label | $bytes | $a | $b | $(ratio "$a" "$b") | $c | $d | $(ratio "$c" "$d") |"
done
echo
echo "The parts: PostgreSQL's large objects without kvg (lo_from_bytea minus the file read; length(lo_get) after"
echo "dropping the OS cache), writes without fsync, and reads with everything cached (a second kvg_artifact_verify,"
echo "a second dd). MB/s."
echo
echo "| size | LO write, kvg_import | LO write, lo_from_bytea | file write, fsync | file write, no fsync" \
  "| LO read, kvg_artifact_verify | LO read, lo_get | file read | LO read, cached | file read, cached |"
echo "|------|------:|------:|------:|------:|------:|------:|------:|------:|------:|"
for r in "${results[@]}"; do
  read -r s reps bytes lo_w lo_raw_w fw fwn ver verw get fr frw fs <<<"$r"
  label="$s MiB"
  [ "$fs" = on ] && label="$s MiB, fsync=on"
  echo "| $label | $(mbps "$bytes" "$lo_w") | $(mbps "$bytes" "$lo_raw_w") | $(mbps "$bytes" "$fw")" \
    "| $(mbps "$bytes" "$fwn") | $(mbps "$bytes" "$ver") | $(mbps "$bytes" "$get") | $(mbps "$bytes" "$fr")" \
    "| $(mbps "$bytes" "$verw") | $(mbps "$bytes" "$frw") |"
done
echo
echo "(storage part: $(since "$started" | cut -d. -f1) s)"

# Graft from a large object vs recompute, on a real model with a long prefix.
sentence='Once upon a time, there was a little girl named Lily. She had a red ball and a small dog named Max.'
target_tokens=2000
prefix=$sentence
while :; do
  longer="$prefix $sentence"
  n=$("$kvg" tokenize --model "$model" --text "$longer" --bos | wc -w)
  [ "$n" -gt "$target_tokens" ] && break
  prefix=$longer
done
out=$(q -v model="$server_model" -v prefix="$prefix" <<'SQL'
SET kvg.model = :'model';
SET kvg.threads = 2;
-- Off for both runs: the recompute must not graft the stored prefix by
-- itself; the graft run names its artifact explicitly.
SET kvg.prefix_reuse = off;
SELECT kvg_capture(:'prefix') AS sha \gset
SELECT n_tokens, bytes FROM kvg.artifacts WHERE sha256 = :'sha' \gset
-- Warm-up (model loaded, caches filled), untimed.
SELECT kvg_generate(' One day', 1, artifact => :'sha') AS w \gset
SELECT kvg_generate(:'prefix' || ' One day', 1) AS w \gset
SELECT extract(epoch FROM clock_timestamp()) AS t0 \gset
SELECT kvg_generate(' One day', 1, artifact => :'sha') AS g1 \gset
SELECT extract(epoch FROM clock_timestamp()) - :t0 AS tg1, extract(epoch FROM clock_timestamp()) AS t0 \gset
SELECT kvg_generate(:'prefix' || ' One day', 1) AS r1 \gset
SELECT extract(epoch FROM clock_timestamp()) - :t0 AS tr1, extract(epoch FROM clock_timestamp()) AS t0 \gset
SELECT kvg_generate(' One day', 1, artifact => :'sha') AS g2 \gset
SELECT extract(epoch FROM clock_timestamp()) - :t0 AS tg2, extract(epoch FROM clock_timestamp()) AS t0 \gset
SELECT kvg_generate(:'prefix' || ' One day', 1) AS r2 \gset
SELECT extract(epoch FROM clock_timestamp()) - :t0 AS tr2, extract(epoch FROM clock_timestamp()) AS t0 \gset
SELECT kvg_generate(' One day', 1, artifact => :'sha') AS g3 \gset
SELECT extract(epoch FROM clock_timestamp()) - :t0 AS tg3, extract(epoch FROM clock_timestamp()) AS t0 \gset
SELECT kvg_generate(:'prefix' || ' One day', 1) AS r3 \gset
SELECT extract(epoch FROM clock_timestamp()) - :t0 AS tr3 \gset
SELECT tokens_in AS g_in, tokens_grafted AS g_grafted FROM kvg.audit
  WHERE operation = 'generate' AND artifact_sha256 = :'sha' ORDER BY id DESC LIMIT 1 \gset
SELECT tokens_in AS r_in, coalesce(tokens_grafted, 0) AS r_grafted FROM kvg.audit
  WHERE operation = 'generate' AND artifact_sha256 IS NULL ORDER BY id DESC LIMIT 1 \gset
\pset format unaligned
\pset tuples_only on
SELECT format('| graft from the large object + 1 token | %s | %s | %s | %s |', :g_in, :g_grafted,
              round(least(:tg1, :tg2, :tg3)::numeric * 1000, 1), to_json(:'g1'::text))
UNION ALL
SELECT format('| recompute (kvg.prefix_reuse = off) + 1 token | %s | %s | %s | %s |', :r_in, :r_grafted,
              round(least(:tr1, :tr2, :tr3)::numeric * 1000, 1), to_json(:'r1'::text))
UNION ALL
SELECT format('speed-up (recompute / graft): %sx; outputs equal in all 3 rounds: %s',
              round((least(:tr1, :tr2, :tr3) / least(:tg1, :tg2, :tg3))::numeric, 2),
              (:'g1' = :'r1' AND :'g2' = :'r2' AND :'g3' = :'r3' AND :'g1' = :'g2' AND :'g2' = :'g3')::text)
UNION ALL
SELECT format('prefix: %s tokens (the sentence %s repeated), artifact %s bytes, %s', :n_tokens,
              to_json(left(:'prefix', 30) || '...'), :bytes, left(:'sha', 16) || '...');
SQL
)
echo
echo "Graft from a large object vs recompute: $(basename "$model"), context 2048, kvg.threads = 2, best of 3"
echo "(each time from the server's clock around one SELECT kvg_generate(...), commit and audit row included)."
echo
echo "| run | prompt tokens | grafted | ms | output |"
echo "|-----|--------------:|--------:|---:|--------|"
echo "$out" | head -2
echo
echo "$out" | tail -n +3
echo
echo "(total: $(since "$started" | cut -d. -f1) s)"
