#!/usr/bin/env bash
# `cmake --install` puts the kvg command under the prefix (component cli) and
# the extension into pg_config's directories (component extension:
# extension/CMakeLists.txt; kvg.so must have been built, the target
# kvg_extension). Installs under a temporary prefix / DESTDIR only, never into
# the real system directories. Usage: install_test.sh BUILD_DIR
set -u
build=$1
# The full install script of the version kvg.control installs.
version=$(sed -n "s/^default_version = '\(.*\)'$/\1/p" "$(dirname "$0")/../../kvg.control")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }

cmake --install "$build" --prefix "$tmp/prefix" --component cli >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "install of the cli component"; }
[ -x "$tmp/prefix/bin/kvg" ] || fail "no bin/kvg under the prefix"
"$tmp/prefix/bin/kvg" help | grep -q '^  capture ' || fail "the installed kvg does not run"

if pg_config >/dev/null 2>&1; then
  DESTDIR=$tmp/dest cmake --install "$build" --component extension >"$tmp/log" 2>&1 || { tail -20 "$tmp/log"; fail "install of the extension component"; }
  for f in "$(pg_config --pkglibdir)/kvg.so" "$(pg_config --sharedir)/extension/kvg.control" \
           "$(pg_config --sharedir)/extension/kvg--$version.sql"; do
    [ -f "$tmp/dest$f" ] || fail "the extension install has no $f (under DESTDIR)"
  done
  so=$tmp/dest$(pg_config --pkglibdir)/kvg.so
  if [ -f "$so" ]; then
    nm -D --defined-only "$so" | awk '{print $3}' | sort -u >"$tmp/exported"
    for s in Pg_magic_func _PG_init pg_finfo_kvg_generate; do
      grep -qx "$s" "$tmp/exported" || fail "kvg.so does not export $s"
    done
    # --exclude-libs: the static libraries' own functions stay hidden.
    nm -g --defined-only "$build"/engine/libkvg_engine.a "$build"/storage/libkvg_storage.a 2>/dev/null |
      awk '$2 == "T" {print $3}' | sort -u | comm -12 - "$tmp/exported" >"$tmp/leaked"
    [ -s "$tmp/leaked" ] && fail "kvg.so exports $(wc -l <"$tmp/leaked") functions of the static libraries, e.g. $(head -1 "$tmp/leaked")"
  fi
elif [ "${CI:-}" = true ]; then
  fail "pg_config not found (postgresql-server-dev-15)"
else
  echo "extension part skipped: pg_config not found"
fi
[ $failed = 0 ] && echo "install: ok"
exit $failed
