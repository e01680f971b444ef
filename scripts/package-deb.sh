#!/usr/bin/env bash
# Builds the Debian packages of kvgraft with dpkg-buildpackage (debian/):
#   postgresql-15-kvg   the extension: kvg.so, kvg.control, sql/kvg--*.sql
#   kvgraft-cli         the kvg command (/usr/bin/kvg)
# and the source package, unsigned, into OUTDIR (default build-deb/), which
# is emptied first. The build runs in a copy of the checkout's files under
# OUTDIR (dpkg-buildpackage writes its results next to the source directory,
# and the copy keeps build trees out of the source package). The engine is
# built CPU-only (debian/rules says why).
#
#   scripts/package-deb.sh [OUTDIR]
#
# KVG_BUILD_DIR=DIR   reuse an existing CPU-only CMake build tree (configured
#                     with -DKVG_CUDA=OFF, e.g. build-emu from scripts/test.sh)
#                     instead of compiling the engine again in the package
#                     (about 6 of the 8 minutes on 2 cores); kvg.so and the
#                     kvg command are then built (if not yet) and installed
#                     from that tree too (debian/rules).
# KVG_CMAKE_ARGS      extra cmake arguments for the package's own tree (a
#                     compiler launcher such as ccache, for instance).
# Needs debhelper and postgresql-server-dev-all (scripts/install-deps.sh --tests).
# The last lines printed are the built .deb files, one per line.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$repo/build-deb}" && cd "${1:-$repo/build-deb}" && pwd)
version=$(dpkg-parsechangelog -l "$repo/debian/changelog" -S Version)
stage=$out/kvgraft-$version

if [ -n "${KVG_BUILD_DIR:-}" ]; then
  KVG_BUILD_DIR=$(cd "$KVG_BUILD_DIR" && pwd)
  if ! grep -qx 'KVG_CUDA:STRING=OFF' "$KVG_BUILD_DIR/CMakeCache.txt" 2>/dev/null; then
    echo "KVG_BUILD_DIR=$KVG_BUILD_DIR is not a CMake tree configured with -DKVG_CUDA=OFF" >&2
    exit 2
  fi
  export KVG_BUILD_DIR
fi

find "$out" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
mkdir -p "$stage"
# The checkout's files as they are now (tracked, and new files git does not
# ignore), without build trees, clusters or .git.
if git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
  git -C "$repo" ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -f "$repo/$f" ] && printf '%s\0' "$f"; done |
    tar -C "$repo" --null -T - -cf - | tar -C "$stage" -xf -
else
  tar -C "$repo" --exclude='./build*' --exclude=./.pgdata --exclude=./.pgrun -cf - . | tar -C "$stage" -xf -
fi

jobs=$(nproc 2>/dev/null || echo 2)
echo "building kvgraft $version in $stage (dpkg-buildpackage -j$jobs${KVG_BUILD_DIR:+, reusing $KVG_BUILD_DIR})"
start=$SECONDS
# debian/control must say what debian/control.in and debian/pgversions say.
(cd "$stage" && pg_buildext checkcontrol)
(cd "$stage" && dpkg-buildpackage -us -uc -j"$jobs") >"$out/build.log" 2>&1 || {
  tail -40 "$out/build.log" >&2
  echo "dpkg-buildpackage failed: the whole log is $out/build.log" >&2
  exit 1
}
echo "built in $((SECONDS - start)) s (log: $out/build.log)"
rm -rf "$stage"
ls "$out"/*.deb
