#!/usr/bin/env bash
# Runs the CUDA executor's tests (tests/cuda/*.cpp) on the CPU with the CUDA
# kernels' own source executed by the SIMT emulator (include/simt.hpp): no
# GPU, no driver.
#
#   kernels/cuda/emulator/run.sh [BUILD_DIR] [gtest arguments...]
#
# BUILD_DIR is a CMake build configured with -DKVG_CUDA=OFF whose
# kvg_test_support target is built (default: build-cuda-off). The kernels,
# engine/cuda_forward.cpp and the tests are compiled here with
# KVG_HAVE_CUDA=1 against that build's libraries; device memory is host
# memory (mock_runtime.cpp), poisoned with NaN bytes when allocated. The
# emulator's own rules are tested by tests/emulator/test_emulator.cpp, in the
# same binary.
#
# Seeds: the threads of a block run in a seeded random order and shared
# memory is poisoned with a seed-chosen pattern (include/simt.hpp). The whole
# suite runs under the first seed of KVG_SIMT_SEEDS (default "1 2 3 4 5"); the
# kernel-level tests (KVG_SIMT_SEEDED_FILTER) run again under each other
# seed (about 10 s of CPU each). Exit status: non-zero if any run failed.
# Slow (every CUDA thread is a fiber): a few minutes for the whole suite.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
build=$(cd "${1:-$repo/build-cuda-off}" && pwd)
shift || true
out=$build/cuda-emulator
mkdir -p "$out"
cxx=(g++ -std=c++20 -O1 -g -ffp-contract=off -fno-fast-math -U_FORTIFY_SOURCE -DKVG_HAVE_CUDA=1 -DKVG_CUDA_EMULATOR=1
     -I"$here/include" -I"$repo")
objects=()
pids=()
compile() {  # compile SOURCE OBJECT, in the background
  "${cxx[@]}" -c "$1" -o "$2" &
  pids+=($!)
  objects+=("$2")
}
for kernel in kernels/cuda/matmul kernels/cuda/matmul_q8 kernels/cuda/ops kernels/cuda/attention kernels/cuda/kv_rounding tests/emulator/probe_kernels; do
  name=$(basename "$kernel")
  python3 "$here/translate.py" "$repo/$kernel.cu" "$out/$name.cpp"
  compile "$out/$name.cpp" "$out/$name.o"
done
compile "$here/simt.cpp" "$out/simt.o"
compile "$here/mock_runtime.cpp" "$out/mock_runtime.o"
compile "$repo/kernels/cuda/device_matrix.cpp" "$out/device_matrix.o"
compile "$repo/kernels/cuda/cuda_runtime_probe.cpp" "$out/cuda_runtime_probe.o"
compile "$repo/engine/cuda_forward.cpp" "$out/cuda_forward.o"
# In the order of their names, as CMake links kvg_test_cuda (tests/cuda/fixtures.hpp).
for source in "$repo"/tests/cuda/*.cpp; do
  compile "$source" "$out/cuda_$(basename "$source" .cpp).o"
done
compile "$repo/tests/emulator/test_emulator.cpp" "$out/test_emulator.o"
for pid in "${pids[@]}"; do wait "$pid" || { echo "run.sh: a compilation failed" >&2; exit 1; }; done
# Objects first: they replace the CPU-only build's CUDA stubs in the archives.
"${cxx[@]}" "${objects[@]}" "$build/tests/libkvg_test_support.a" "$build/tools/libkvg_tools.a" "$build/engine/libkvg_engine.a" \
  "$build/kernels/libkvg_kernels.a" "$build/storage/libkvg_storage.a" -lgtest_main -lgtest -lcrypto -lpcre2-8 -lpthread \
  -o "$out/kvg_test_cuda_emulated"
read -r -a seeds <<<"${KVG_SIMT_SEEDS:-1 2 3 4 5}"
filter=${KVG_SIMT_SEEDED_FILTER:-'CudaKernels.*:Emulator*-CudaKernels.Exp*'}  # exp: no barriers, 17M values
status=0
echo "SIMT emulator: whole suite, seed ${seeds[0]}"
KVG_SIMT_SEED=${seeds[0]} "$out/kvg_test_cuda_emulated" "$@" || status=1
for seed in "${seeds[@]:1}"; do
  echo "SIMT emulator: seed $seed, tests $filter"
  KVG_SIMT_SEED=$seed "$out/kvg_test_cuda_emulated" --gtest_filter="$filter" "$@" || status=1
done
exit $status
