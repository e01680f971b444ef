#!/usr/bin/env bash
# The extension's SQL tests, against the private cluster (scripts/pg-cluster.sh,
# started here if needed, with the freshly built extension installed):
#   1. pg_regress: sql/*.sql vs expected/*.out
#   2. pgTAP:      tests/pgtap/*.sql with pg_prove, in a fresh database
#   3. pg_dump/pg_restore round trip: tests/pgtap/restore/seed.sql fills a
#      database, which is dumped and restored into another one, where
#      tests/pgtap/restore/verify.sql checks artifacts and audit chain.
#   4. ALTER EXTENSION kvg UPDATE: a database in kvg 0.1.0's state
#      (tests/pgtap/upgrade/seed.sql) is updated, checked by
#      tests/pgtap/upgrade/verify.sql, and its mixed-encoding audit chain
#      re-checked offline by scripts/kvg-manifest-check.py.
#   5. reliability: tests/pgtap/reliability/*.sql in a fresh database (output
#      that is not UTF-8, and its manifest re-checked offline; DROP EXTENSION
#      without orphaned large objects; kvg.max_kv_memory; a model file
#      truncated, replaced and removed between calls).
#   6. crash safety: tests/crash/crash_test.sh SIGKILLs backends mid-call and
#      stops a throwaway cluster with -m immediate, then checks artifacts,
#      orphans, knowledge entries and the audit chain.
# Exits non-zero if any step fails (all steps run regardless).
set -uo pipefail
source "$(dirname "$0")/pg-env.sh"
cd "$repo"

"$repo/scripts/pg-cluster.sh" start || exit 1
export KVG_FIXTURES=${KVG_FIXTURES:-$repo/${KVG_BUILD_DIR:-build}/pg-fixtures}
export KVG_SHARED=${KVG_SHARED:-$(cd "$repo/.." && pwd)/shared}  # the shared test models
make -s -f Makefile.pgxs kvg-fixtures >/dev/null || exit 1

failed=()
fresh_db() {  # fresh_db NAME EXTENSION...
  local db=$1
  shift
  PGOPTIONS='-c client_min_messages=warning' psql -X -q -d postgres \
    -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" || return 1
  for ext in "$@"; do psql -X -q -d "$db" -c "CREATE EXTENSION $ext" || return 1; done
}

echo "== pg_regress"
make -s -f Makefile.pgxs installcheck || {
  failed+=(pg_regress)
  [ -f regression.diffs ] && head -100 regression.diffs
}

echo "== pgTAP"
if fresh_db kvg_tap kvg pgtap dblink; then
  pg_prove -d kvg_tap tests/pgtap/*.sql || failed+=(pgtap)
else
  failed+=(pgtap-setup)
fi

echo "== pg_dump / pg_restore"
# pg_dump warns about kvg.artifacts' self-referencing foreign key; the
# constraint is deferred, so the restore loads parents and children in any order.
dump=$pg_run/kvg_dump.pgdump
if fresh_db kvg_dump_src kvg &&
  psql -X -q -v ON_ERROR_STOP=1 -o /dev/null -d kvg_dump_src -f tests/pgtap/restore/seed.sql &&
  pg_dump -Fc -d kvg_dump_src -f "$dump" &&
  fresh_db kvg_dump_dst &&
  pg_restore --exit-on-error -d kvg_dump_dst "$dump" &&
  psql -X -q -d kvg_dump_dst -c "CREATE EXTENSION pgtap"; then
  pg_prove -d kvg_dump_dst tests/pgtap/restore/verify.sql || failed+=(restore)
else
  failed+=(restore-setup)
fi

echo "== ALTER EXTENSION kvg UPDATE from 0.1.0"
manifest=$pg_run/kvg_upgrade_manifest.json
if fresh_db kvg_upgrade &&
  psql -X -q -v ON_ERROR_STOP=1 -o /dev/null -d kvg_upgrade -c "CREATE EXTENSION kvg VERSION '0.1.0'" \
    -f tests/pgtap/upgrade/seed.sql -c "ALTER EXTENSION kvg UPDATE" -c "CREATE EXTENSION pgtap"; then
  pg_prove -d kvg_upgrade tests/pgtap/upgrade/verify.sql || failed+=(upgrade)
  psql -X -q -v ON_ERROR_STOP=1 -o /dev/null -d kvg_upgrade \
    -c "SELECT public.kvg_import(pg_read_binary_file('$KVG_FIXTURES/dump.kvga'), verify => false)" &&
    psql -X -At -d kvg_upgrade -c 'SELECT kvg_manifest()' >"$manifest" &&
    python3 scripts/kvg-manifest-check.py "$manifest" || failed+=(upgrade-manifest)
else
  failed+=(upgrade-setup)
fi

echo "== reliability (tests/pgtap/reliability: output bytes, orphans, memory bound, model file changes)"
# A synthetic model that emits bytes that are not UTF-8, and a directory the
# tests copy, truncate and remove a model in (psql \! runs as this user).
kvg_cli=$repo/${KVG_BUILD_DIR:-build}/cli/kvg
reliability_tmp=$(mktemp -d /tmp/kvg-reliability.XXXXXX)
chmod 755 "$reliability_tmp"
export KVG_RELIABILITY_TMP=$reliability_tmp
manifest=$pg_run/kvg_reliability_manifest.json
if "$kvg_cli" synth --out "$KVG_FIXTURES/synth.gguf" --seed 1 --n-ctx 512 >/dev/null && fresh_db kvg_reliability kvg pgtap
then
  pg_prove -d kvg_reliability tests/pgtap/reliability/01_output_bytes.sql || failed+=(reliability-output)
  # Offline: the rows with raw bytes re-hash, and a changed byte is caught.
  if psql -X -At -d kvg_reliability -c 'SELECT kvg_manifest()' >"$manifest" &&
    python3 scripts/kvg-manifest-check.py "$manifest" >/dev/null; then
    python3 - "$manifest" <<'PY' && ! python3 scripts/kvg-manifest-check.py "$manifest.bad" >/dev/null 2>&1 ||
import json, sys
m = json.load(open(sys.argv[1]))
e = next(e for e in m["entries"] if e.get("output_bytes"))
e["output_bytes"] = ("00" if e["output_bytes"][:2] != "00" else "01") + e["output_bytes"][2:]
json.dump(m, open(sys.argv[1] + ".bad", "w"))
PY
      failed+=(reliability-manifest-tamper)
  else
    failed+=(reliability-manifest)
  fi
  pg_prove -d kvg_reliability tests/pgtap/reliability/02_orphans.sql tests/pgtap/reliability/03_limits_and_files.sql ||
    failed+=(reliability)
else
  failed+=(reliability-setup)
fi
rm -rf "$reliability_tmp"

echo "== crash safety (tests/crash/crash_test.sh, its own throwaway cluster)"
bash tests/crash/crash_test.sh || failed+=(crash)

if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED: ${failed[*]}"
  exit 1
fi
echo "all PostgreSQL tests passed"
