#!/usr/bin/env bash
# scripts/gpu-check.sh on a GPU machine that has the NVIDIA driver but not
# kvg's build dependencies (GoogleTest, OpenSSL and PCRE2 headers) or a
# PostgreSQL server, and no package registry: a rented GPU box, or the one
# the first H200 run used (docs/gpu.md, "Measured on an H200").
#
#   scripts/gpu-bundle.sh pack FILE.tar.xz
#       here, after scripts/build.sh with nvcc present: kvg, kvg_test_cuda
#       and kvg.so (with the CUDA kernels), the shared libraries they and
#       PostgreSQL need beyond the C and C++ runtimes, and the PostgreSQL
#       server installation (pg_config's), with kvg installed in it. Every
#       executable and module gets an RPATH into the bundle (patchelf), so
#       nothing runs with LD_LIBRARY_PATH. About 25 MB.
#   scripts/gpu-bundle.sh check FILE.tar.xz [STAGES]
#       there, in a checkout of the same commit (the tests read tests/data):
#       unpacks into $KVG_GPU_BUNDLE_DIR (default /tmp/kvg-gpu-bundle), makes
#       the `postgres` user when run as root and it is missing, and runs
#       scripts/gpu-check.sh's STAGES (default "tests archs postgres bench":
#       everything but the build) on the bundle's binaries and server.
#
# The machine needs glibc 2.36 or newer and libstdc++ from GCC 12 or newer
# (those are not bundled); Ubuntu 24.04 ran it.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
usage() { echo "usage: $0 pack FILE.tar.xz | check FILE.tar.xz [STAGES]" >&2; exit 2; }
[ $# -ge 2 ] || usage

# The C and C++ runtimes stay the machine's own: a newer glibc runs
# binaries built against an older one, not the other way round.
system_library() { [[ $(basename "$1") =~ ^(libc|libm|libstdc\+\+|libgcc_s|libresolv|libpthread|libdl|librt|ld-linux.*)\.so ]]; }

pack() {
  local out=$1 build=$repo/build
  command -v patchelf >/dev/null || { echo "pack needs patchelf (apt-get install patchelf)" >&2; exit 1; }
  command -v pg_config >/dev/null || { echo "pack needs a PostgreSQL server installation (pg_config)" >&2; exit 1; }
  cmake --build "$build" -j "$(nproc)" --target kvg kvg_test_cuda kvg_extension >/dev/null
  "$build/cli/kvg" --version | grep -q '^cuda *built' ||
    { echo "$build was configured without CUDA (nvcc missing?): nothing to check on a GPU" >&2; exit 1; }
  stage=$(mktemp -d)  # global: the EXIT trap runs after pack returns
  trap 'rm -rf "$stage"' EXIT
  # The PostgreSQL installation, laid out as pg_config sees it (its paths
  # are relative to its own, so the copy finds its share and lib folders).
  local bindir pkglibdir sharedir pg
  bindir=$(pg_config --bindir) pkglibdir=$(pg_config --pkglibdir) sharedir=$(pg_config --sharedir)
  pg=$stage/pg
  mkdir -p "$pg$bindir" "$pg$pkglibdir" "$pg$sharedir" "$stage/lib" "$stage/build/cli" "$stage/build/tests"
  cp "$bindir"/{postgres,initdb,pg_ctl,psql,pg_config} "$pg$bindir/"
  cp "$pkglibdir"/{plpgsql,dict_snowball}.so "$pg$pkglibdir/"
  cp -r "$sharedir"/. "$pg$sharedir/"
  cp "$repo/kvg.control" "$repo"/sql/kvg--*.sql "$pg$sharedir/extension/"
  strip -o "$pg$pkglibdir/kvg.so" "$build/extension/kvg.so"
  strip -o "$stage/build/cli/kvg" "$build/cli/kvg"
  strip -o "$stage/build/tests/kvg_test_cuda" "$build/tests/kvg_test_cuda"
  local f lib
  while IFS= read -r f; do
    for lib in $(ldd "$f" | awk '/=> \// { print $3 }'); do
      system_library "$lib" || cp -Ln "$lib" "$stage/lib/"
    done
    # DT_RPATH, not RUNPATH: it also serves the libraries' own dependencies.
    patchelf --force-rpath --set-rpath "\$ORIGIN/$(realpath --relative-to="$(dirname "$f")" "$stage/lib")" "$f"
  done < <(find "$stage/build" "$pg$bindir" "$pg$pkglibdir" -type f)
  chmod 755 "$stage"  # mktemp's 700 would travel, and `postgres` must read the server
  tar -C "$stage" -cf - . | xz -T0 -6 >"$out"
  echo "$out: $(du -h "$out" | cut -f1), for commit $(git -C "$repo" rev-parse --short HEAD)"
}

check() {
  local bundle=$1 stages=${2:-tests archs postgres bench} dir=${KVG_GPU_BUNDLE_DIR:-/tmp/kvg-gpu-bundle}
  # Only an earlier bundle is replaced: the folder may come from the environment.
  if [ -e "$dir" ] && [ ! -x "$dir/build/cli/kvg" ]; then
    echo "$dir exists and is not an unpacked bundle: set KVG_GPU_BUNDLE_DIR to a new folder" >&2
    exit 1
  fi
  rm -rf "$dir"
  mkdir -p "$dir"
  tar -C "$dir" -xJf "$bundle"
  if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    useradd --system --no-create-home --home-dir /nonexistent postgres
  fi
  local pg_bindir
  pg_bindir=$(dirname "$(find "$dir/pg" -path '*/bin/pg_config' | head -1)")
  PATH=$pg_bindir:$PATH KVG_GPU_BUILD=$dir/build KVG_EXTENSION_INSTALLED=1 KVG_GPU_CHECK_STAGES=$stages \
    exec "$repo/scripts/gpu-check.sh"
}

case "$1" in
  pack) pack "$2" ;;
  check) check "$2" "${3:-}" ;;
  *) usage ;;
esac
