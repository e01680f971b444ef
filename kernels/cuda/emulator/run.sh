#!/usr/bin/env bash
# Runs tests/test_cuda.cpp on the CPU with the CUDA kernels' own source
# executed by the SIMT emulator (include/simt.hpp): no GPU, no driver.
#
#   kernels/cuda/emulator/run.sh [BUILD_DIR] [gtest arguments...]
#
# BUILD_DIR is a CMake build configured with -DKVG_CUDA=OFF whose
# kvg_test_support target is built (default: build-cuda-off). The kernels,
# engine/cuda_forward.cpp and the tests are compiled here with
# KVG_HAVE_CUDA=1 against that build's libraries; device memory is host
# memory (mock_runtime.cpp), poisoned with NaN bytes when allocated.
# Slow (every CUDA thread is a fiber): a few minutes for the whole file.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
build=$(cd "${1:-$repo/build-cuda-off}" && pwd)
shift || true
out=$build/cuda-emulator
mkdir -p "$out"
cxx=(g++ -std=c++20 -O1 -g -ffp-contract=off -fno-fast-math -U_FORTIFY_SOURCE -DKVG_HAVE_CUDA=1
     -I"$here/include" -I"$repo")
objects=()
pids=()
compile() {  # compile SOURCE OBJECT, in the background
  "${cxx[@]}" -c "$1" -o "$2" &
  pids+=($!)
  objects+=("$2")
}
for kernel in matmul ops attention; do
  python3 "$here/translate.py" "$repo/kernels/cuda/$kernel.cu" "$out/$kernel.cpp"
  compile "$out/$kernel.cpp" "$out/$kernel.o"
done
compile "$here/simt.cpp" "$out/simt.o"
compile "$here/mock_runtime.cpp" "$out/mock_runtime.o"
compile "$repo/kernels/cuda/device_matrix.cpp" "$out/device_matrix.o"
compile "$repo/kernels/cuda/cuda_runtime_probe.cpp" "$out/cuda_runtime_probe.o"
compile "$repo/engine/cuda_forward.cpp" "$out/cuda_forward.o"
compile "$repo/tests/test_cuda.cpp" "$out/test_cuda.o"
for pid in "${pids[@]}"; do wait "$pid"; done
# Objects first: they replace the CPU-only build's CUDA stubs in the archives.
"${cxx[@]}" "${objects[@]}" "$build/tests/libkvg_test_support.a" "$build/engine/libkvg_engine.a" \
  "$build/kernels/libkvg_kernels.a" "$build/storage/libkvg_storage.a" -lgtest_main -lgtest -lcrypto -lpcre2-8 -lpthread \
  -o "$out/kvg_test_cuda_emulated"
exec "$out/kvg_test_cuda_emulated" "$@"
