#!/usr/bin/env bash
# Issue #4's measurement on the private cluster: `kvg bench-store` (large
# objects vs plain files by artifact size, graft from a large object vs
# recompute; see cli/bench/cmd_bench_store.cpp for what is timed and how).
#
#   scripts/bench-lo.sh
#   KVG_BENCH_LO_SIZES=1,16 scripts/bench-lo.sh   # sizes in MiB, quicker
#
# Needs build/cli/kvg (scripts/build.sh), the extension installable by
# scripts/pg-cluster.sh, and the stories260K model
# (tests/data/models/stories260K.gguf, or KVG_MODEL=path).
set -euo pipefail
source "$(dirname "$0")/pg-env.sh"
cd "$repo"
kvg=$repo/build/cli/kvg
# By default the server's own copy of the test model (pg-cluster.sh start
# stages it): the server opens the file, and may not reach the repository.
model=${KVG_MODEL:-$pg_files/models/stories260K.gguf}
[ -d "$repo/build" ] && cmake --build "$repo/build" --target kvg >/dev/null
[ -x "$kvg" ] || { echo "no $kvg: run scripts/build.sh first" >&2; exit 1; }

"$repo/scripts/pg-cluster.sh" start >/dev/null
[ -f "$model" ] || { echo "no model at $model: set KVG_MODEL=/path/to/stories260K.gguf" >&2; exit 1; }
echo "machine: $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) memory;" \
  "files and .pgdata on $(df --output=source,fstype "$pg_data" | tail -1 | tr -s ' ')"
# The plain files go next to the cluster's data, on the same disk. As root the
# server's files are readable, so their OS page cache can be dropped.
exec "$kvg" bench-store --db "dbname=postgres" --dir "$repo/build" --model "$(realpath "$model")" \
  --sizes "${KVG_BENCH_LO_SIZES:-1,16,256,1000}" "$@"
