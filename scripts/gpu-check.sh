#!/usr/bin/env bash
# The GPU check (issue #6), for a machine with an NVIDIA GPU, nvcc, cmake,
# g++, OpenSSL and GoogleTest (no network needed):
#
#   1. configures build-gpu/ with -DKVG_CUDA=ON and builds only the CUDA test
#      binary and the kvg CLI;
#   2. runs every CUDA test — kernels against their CPU definitions, whole
#      models (logits SHA-256 equal to the CPU's for every chunking), grafts
#      across devices — and fails unless a GPU was actually used;
#   3. writes a ~1B-parameter q8_0 synthetic model (`kvg synth`) and prints
#      one table: prefill and decode tokens/s on CPU and GPU, and graft
#      versus recompute time, with the exactness of each.
#
# Environment: KVG_TEST_DATA (the test models, default tests/data),
# KVG_GPU_BUILD (build directory, default build-gpu), JOBS (default nproc),
# KVG_BENCH_PROMPT (prompt tokens for the table, default 256).
# Budget: about 1-2 minutes of build on 16 cores, well under 8 minutes total.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${KVG_GPU_BUILD:-$repo/build-gpu}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 4)}
export KVG_TEST_DATA=${KVG_TEST_DATA:-$repo/tests/data}
start=$SECONDS
stage() { echo; echo "== $* (at $((SECONDS - start)) s)"; }

stage "GPU"
if command -v nvidia-smi >/dev/null; then nvidia-smi -L || true; else echo "nvidia-smi not found"; fi

stage "configure ($build, KVG_CUDA=ON)"
mkdir -p "$build"
cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVG_CUDA=ON >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log"; exit 1; }
grep -E "KVG_CUDA" "$build/configure.log" || true

stage "build kvg_test_cuda and kvg with -j$jobs"
timeout 300 cmake --build "$build" -j "$jobs" --target kvg_test_cuda kvg

stage "CUDA tests"
[ -d "$KVG_TEST_DATA/models" ] || echo "warning: no models under $KVG_TEST_DATA: the model tests will skip"
log=$build/gpu-tests.log
set +e
timeout 300 "$build/tests/kvg_test_cuda" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
if ! grep -q "cuda_device_available: yes" "$log"; then
  echo "FAIL: no usable GPU (see the reason above); the GPU tests only skipped"
  exit 1
fi
[ "$status" -eq 0 ] || { echo "FAIL: CUDA tests failed (exit $status)"; exit "$status"; }

stage "benchmark model: kvg synth, ~1B parameters, q8_0"
model=$build/synth-1b-q8_0.gguf
if [ ! -f "$model" ]; then
  timeout 300 "$build/cli/kvg" synth --out "$model" --n-embd 2048 --n-layer 16 --n-head 32 --n-head-kv 8 \
    --n-ff 8192 --vocab 32000 --type q8_0 --n-ctx 2048 --seed 1
fi
ls -l "$model"

stage "benchmark: CPU versus GPU"
KVG_BENCH_MODEL=$model timeout 300 "$build/tests/kvg_test_cuda" --gtest_also_run_disabled_tests \
  --gtest_filter='CudaBench.*'

stage "done"
