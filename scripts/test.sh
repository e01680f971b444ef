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

echo "== PostgreSQL extension"
"$repo/scripts/pg-test.sh" || status=1
exit $status
