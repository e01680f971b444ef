#!/usr/bin/env bash
# The README's quickstart, pasted as it is (#38): its SQL block into one psql
# session of a fresh cluster (kvg preloaded, as its first block sets up), with
# the vendored story model where the README says to copy it, then its shell
# block (the manifest and its offline check). Each documented result is
# checked: the entry's id, an answer that its verifier accepts (kvg_answer
# returns only those), recurring, verified and grafted, no WARNING, and a
# manifest that checks.
#
# Also the race the quickstart used to lose: ALTER SYSTEM SET kvg.model;
# SELECT pg_reload_conf(); and a call at once in the same session, which
# reached the backend before the reload's signal did ("kvg.model is not
# set"). Repeated, each time from an unset model.
#
# Runs its own throwaway cluster (a temporary directory, port KVG_PGPORT+120,
# Unix socket only): ALTER SYSTEM must not touch the shared test cluster. TAP
# lines. Needs the extension installed (scripts/pg-cluster.sh start does that).
set -uo pipefail
source "$(dirname "$0")/../../scripts/pg-env.sh"
model=${KVG_TEST_DATA:-$repo/tests/data}/models/stories260K.gguf
port=$((pg_port + 120))
dir=$(mktemp -d /tmp/kvg-quickstart.XXXXXX)
[ "$(id -u)" = 0 ] && chown postgres: "$dir"
mkdir -p "$dir/models" && cp "$model" "$dir/models/stories260K.gguf" && server_readable "$dir/models"
data=$dir/data
export PGHOST=$dir PGPORT=$port PGUSER=postgres PGDATABASE=quickstart
n=0
failures=0
check() {  # check DESCRIPTION COMMAND...
  n=$((n + 1))
  if "${@:2}"; then echo "ok $n - $1"; else echo "not ok $n - $1"; failures=$((failures + 1)); fi
}
cleanup() {
  as_postgres "$pg_bin/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1
  rm -rf "$dir"
}
trap cleanup EXIT

# The last fenced block of LANGUAGE in the README's quickstart section (the
# first shell block installs the package, which tests/deb tests), with the
# model directory it names replaced by this test's.
readme_block() {
  awk -v lang="$1" '/^## / { q = /^## Quickstart/ } q && $0 == "```" lang { b = 1; block = ""; next }
                    b && /^```/ { b = 0; last = block; next } b { block = block $0 "\n" }
                    END { printf "%s", last }' "$repo/README.md" | sed "s|/srv/models/|$dir/models/|g"
}
readme_block sql >"$dir/quickstart.sql"
readme_block sh >"$dir/quickstart.sh"
check "the README has a quickstart SQL block that sets kvg.model and answers" \
  grep -q "kvg_answer('Zoe wore her')" "$dir/quickstart.sql"
check "and a shell block that checks the manifest" grep -q "kvg-manifest-check.py" "$dir/quickstart.sh"

init_private_cluster "$data" "$dir" "$port" "shared_preload_libraries = 'kvg'" "shared_buffers = 64MB" \
  "kvg.device = cpu" || exit 1
as_postgres "$pg_bin/pg_ctl" -D "$data" -l "$dir/server.log" -w start >/dev/null || { tail -20 "$dir/server.log"; exit 1; }
psql -X -q -d postgres -c "CREATE DATABASE quickstart" || exit 1

# Pasted into one session. -At: one line per result, to compare.
out=$(psql -X -q -At -v ON_ERROR_STOP=1 -f "$dir/quickstart.sql" 2>&1)
status=$?
echo "$out" | sed 's/^/# /'
check "the SQL block runs as pasted, in one session" [ "$status" = 0 ]
check "with no WARNING (nothing unverified, nothing unset)" bash -c '! grep -q "WARNING\|ERROR" <<<"$1"' _ "$out"
results=$(grep -v '^t$' <<<"$out")  # pg_reload_conf()'s t
check "kvg_learn returns the entry's id, 1" [ "$(sed -n 1p <<<"$results")" = 1 ]
answer=$(sed -n 2p <<<"$results")
check "kvg_answer returns the answer the README shows ($answer)" [ "$answer" = "pink dress and showed it to her friends." ]
check "recurring, verified and grafted" [ "$(sed -n 3p <<<"$results")" = "recurring|t|t" ]

# Run where a checkout's scripts/ is, as the README's reader would.
mkdir -p "$dir/checkout/scripts" && cp "$repo/scripts/kvg-manifest-check.py" "$dir/checkout/scripts/"
(cd "$dir/checkout" && bash -euo pipefail "$dir/quickstart.sh") >"$dir/manifest.out" 2>&1
status=$?
sed 's/^/# /' "$dir/manifest.out"
check "the shell block exports the manifest and the offline check passes" [ "$status" = 0 ]
check "... a manifest of the learn and the answers" grep -q "manifest ok: 3 rows" "$dir/manifest.out"

# The reload race, again and again: each round starts from an unset model
# (reset and reloaded, and waited for), then sets it and calls at once.
race_failures=0
for round in $(seq 1 20); do
  psql -X -q -At -c "ALTER SYSTEM RESET kvg.model" -c "SELECT pg_reload_conf()" >/dev/null
  for _ in $(seq 1 50); do
    [ -z "$(psql -X -At -c 'SHOW kvg.model')" ] && break
    sleep 0.1
  done
  psql -X -q -At -v ON_ERROR_STOP=1 -c "ALTER SYSTEM SET kvg.model = '$dir/models/stories260K.gguf'" \
    -c "SELECT pg_reload_conf()" -c "SELECT kvg_generate('Once upon a time', 1)" >"$dir/race.out" 2>&1 ||
    { race_failures=$((race_failures + 1)); echo "# round $round: $(grep ERROR "$dir/race.out")"; }
done
check "a call right after ALTER SYSTEM SET kvg.model and pg_reload_conf() finds the model (20 of 20)" \
  [ "$race_failures" = 0 ]

echo "1..$n"
echo "quickstart: $((n - failures)) passed, $failures failed"
[ "$failures" = 0 ]
