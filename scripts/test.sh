#!/usr/bin/env bash
# Every test: the GoogleTest suites (kernels, storage, engine, CLI) through
# ctest, then the extension's pg_regress, pgTAP and dump/restore tests against
# a private PostgreSQL cluster that this script starts itself.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
"$repo/scripts/install-deps.sh" || exit 1
"$repo/scripts/build.sh" || exit 1

status=0
echo "== GoogleTest suites (ctest)"
(cd build && ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)") || status=1

echo "== CUDA kernels on the CPU (SIMT emulator: the kernels' own source, every thread emulated)"
# Proves here, without a GPU, that the CUDA kernels compute the CPU recipe's
# bits; a real GPU adds the hardware's arithmetic (scripts/gpu-check.sh).
cmake -S "$repo" -B "$repo/build-emu" -DKVG_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
  cmake --build "$repo/build-emu" --target kvg_test_support -j "$(nproc 2>/dev/null || echo 2)" >/dev/null &&
  bash "$repo/kernels/cuda/emulator/run.sh" "$repo/build-emu" || status=1

echo "== PostgreSQL extension"
"$repo/scripts/pg-test.sh" || status=1
exit $status
