#!/usr/bin/env bash
# `cmake --install` puts the kvg command under the prefix (component cli) and
# the extension into pg_config's directories (component extension, through
# Makefile.pgxs). Installs under a temporary prefix / DESTDIR only, never into
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
elif [ "${CI:-}" = true ]; then
  fail "pg_config not found (postgresql-server-dev-15)"
else
  echo "extension part skipped: pg_config not found"
fi
[ $failed = 0 ] && echo "install: ok"
exit $failed
