#!/usr/bin/env bash
# Configures and builds the CMake tree in build/ (engine, CLI, the extension
# kvg.so when pg_config is found, tests; CUDA kernels too when nvcc is found,
# see KVG_CUDA in CMakeLists.txt). make -f Makefile.pgxs uses the same tree.
#   scripts/build.sh              everything
#   scripts/build.sh TARGET...    only those targets (scripts/demo.sh: kvg; kvg_extension: kvg.so)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S "$repo" -B "$repo/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo ${KVG_CMAKE_ARGS:-} >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$repo/build" -j "$jobs" "${targets[@]}"
