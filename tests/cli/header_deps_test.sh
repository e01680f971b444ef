#!/usr/bin/env bash
# kvg.so's header dependencies come from the compiler (-MD depfiles, which
# CMake's Makefile generator reads): a header the extension includes only
# through other headers, kernels/host_device.hpp (engine headers include it),
# and the boundary header extension/src/pg/postgres.hpp each make kvg.so
# out of date. Asked of make without touching anything: `make -n -W FILE`
# answers "what would be rebuilt if FILE had just changed". make does not
# pass -W down to the sub-makes CMake's top-level Makefile runs, so the
# question goes to the target's own makefile, the one that holds the
# compiler's dependencies (compiler_depend.make, read by build.make).
# CMake gathers the depfiles into compiler_depend.make in the target's
# `depend` step, which every `make` runs before it decides what is stale;
# right after a first build that file is still empty, so the test runs that
# step too (it compiles nothing) before it asks.
#   header_deps_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$(cd "$2" && pwd)  # absolute, as the depfiles name headers
[ -f "$build/Makefile" ] || { echo "FAIL: $build is not a Makefile build tree"; exit 1; }
grep -q '^kvg_extension:' "$build/Makefile" || { echo "FAIL: no kvg_extension target (pg_config missing?)"; exit 1; }

target=extension/CMakeFiles/kvg_extension.dir
[ -f "$build/$target/build.make" ] || { echo "FAIL: no $target/build.make in $build"; exit 1; }
make -C "$build" -s -f "$target/build.make" "$target/depend" >/dev/null
dry_run() { make -C "$build" -n "$@" -f "$target/build.make" "$target/build" 2>&1; }
links_kvg_so() { grep -q 'Linking CXX shared module kvg.so'; }

status=0
if dry_run | links_kvg_so; then
  echo "FAIL: kvg.so is out of date before anything changed (build first)"
  status=1
fi
for header in kernels/host_device.hpp extension/src/pg/postgres.hpp; do
  out=$(dry_run -W "$src/$header")
  compiled=$(grep -c 'kvg_extension.dir/src/.*\.cpp\.o -c' <<<"$out" || true)
  if links_kvg_so <<<"$out" && [ "$compiled" -gt 0 ]; then
    echo "ok: a change to $header recompiles $compiled extension objects and relinks kvg.so"
  else
    echo "FAIL: a change to $header would not rebuild kvg.so ($compiled extension objects recompiled)"
    status=1
  fi
done
exit $status
