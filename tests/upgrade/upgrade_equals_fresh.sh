#!/usr/bin/env bash
# Upgrading kvg gives the same catalog as installing it fresh.
#
# For each upgrade script sql/kvg--A--B.sql: one database gets CREATE
# EXTENSION kvg VERSION 'A' and ALTER EXTENSION kvg UPDATE TO 'B', another
# CREATE EXTENSION kvg VERSION 'B', and their catalogs (tests/upgrade/catalog.sql:
# every member object, functions with signatures, defaults and bodies,
# columns in order, constraints, indexes, triggers, policies, grants, types,
# views, comments) must be equal; the test fails with the diff when they are
# not. Until a release has an upgrade script there is none to check, so the
# test also builds a throwaway change of its own, from the current version
# (kvg.control's default_version) to the next patch version: it writes an
# upgrade script and the full install script of that version into the
# server's extension directory, compares, and removes them. And it proves it
# can fail: upgrade scripts that get the change slightly wrong (a comment, a
# default, a grant, a column type, an index, a constraint) must each be
# caught.
#
# Needs the running test cluster with kvg installed (scripts/pg-cluster.sh
# start; scripts/pg-test.sh runs this under the install lock) and write access
# to pg_config's extension directory. Prints TAP ("ok N - ..."), exits
# non-zero when a check fails.
set -uo pipefail
source "$(dirname "$0")/../../scripts/pg-env.sh"
cd "$repo"

extdir=$(pg_config --sharedir)/extension
current=$(sed -n "s/^default_version = '\(.*\)'$/\1/p" kvg.control)
work=$(mktemp -d)
written=()
cleanup() {
  rm -f "${written[@]}"
  for db in kvg_upgrade_path kvg_upgrade_fresh; do
    PGOPTIONS='-c client_min_messages=warning' psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1
  done
  rm -rf "$work"
}
trap cleanup EXIT

n=0
failures=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $1"; }

fresh_db() {
  PGOPTIONS='-c client_min_messages=warning' psql -X -q -d postgres \
    -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1" >/dev/null
}
# snapshot DB FILE: the catalog of kvg in DB.
snapshot() { psql -X -q -v ON_ERROR_STOP=1 -d "$1" -f tests/upgrade/catalog.sql >"$2"; }

# compare FROM TO: 0 when upgrading FROM -> TO gives the catalog of a fresh
# TO; otherwise prints why (the diff, or the error) and returns 1.
compare() {
  local from=$1 to=$2
  fresh_db kvg_upgrade_path && fresh_db kvg_upgrade_fresh || return 1
  if ! psql -X -q -v ON_ERROR_STOP=1 -d kvg_upgrade_path -c "CREATE EXTENSION kvg VERSION '$from'" \
      -c "ALTER EXTENSION kvg UPDATE TO '$to'" >"$work/upgrade.log" 2>&1; then
    sed 's/^/# /' "$work/upgrade.log"
    return 1
  fi
  if ! psql -X -q -v ON_ERROR_STOP=1 -d kvg_upgrade_fresh -c "CREATE EXTENSION kvg VERSION '$to'" \
      >"$work/fresh.log" 2>&1; then
    sed 's/^/# /' "$work/fresh.log"
    return 1
  fi
  snapshot kvg_upgrade_path "$work/upgraded.txt" && snapshot kvg_upgrade_fresh "$work/fresh.txt" || return 1
  # A snapshot that lists nothing would compare equal to anything.
  if ! grep -q '^function | kvg_answer(' "$work/fresh.txt"; then
    echo "# the catalog snapshot of a fresh $to lists no kvg_answer: tests/upgrade/catalog.sql is broken"
    return 1
  fi
  if ! diff -u --label "upgraded $from -> $to" --label "fresh $to" "$work/upgraded.txt" "$work/fresh.txt" \
      >"$work/diff"; then
    sed 's/^/# /' "$work/diff"
    return 1
  fi
}

# CREATE EXTENSION kvg runs one script: PostgreSQL takes a version's own
# install script when there is one, and replays upgrade scripts only when
# there is not.
if [ -f "sql/kvg--$current.sql" ]; then
  ok "the default version $current has its own full install script (CREATE EXTENSION runs only it)"
else
  not_ok "the default version $current has its own full install script (CREATE EXTENSION runs only it)"
fi

# The real upgrade scripts: each must reach its target's fresh catalog.
shopt -s nullglob
real=(sql/kvg--*--*.sql)
if [ ${#real[@]} = 0 ]; then
  echo "# no upgrade scripts in sql/ yet (kvg $current is the first release): the throwaway change below is the test"
fi
for script in "${real[@]}"; do
  versions=$(basename "$script" .sql)
  versions=${versions#kvg--}
  from=${versions%%--*}
  to=${versions#*--}
  if [ ! -f "sql/kvg--$to.sql" ]; then
    not_ok "$script: there is no full install script sql/kvg--$to.sql to compare with"
  elif compare "$from" "$to"; then
    ok "upgrading $from -> $to gives the catalog of a fresh $to"
  else
    not_ok "upgrading $from -> $to gives the catalog of a fresh $to"
  fi
done

# The throwaway change: the next patch version that no script in sql/ names.
if [ ! -w "$extdir" ]; then
  not_ok "cannot write the throwaway version's scripts into $extdir"
  echo "1..$n"
  exit 1
fi
IFS=. read -r major minor patch <<<"$current"
patch=$((patch + 1))
while compgen -G "sql/kvg--$major.$minor.$patch*.sql" >/dev/null || compgen -G "sql/kvg--*--$major.$minor.$patch.sql" >/dev/null; do
  patch=$((patch + 1))
done
next=$major.$minor.$patch
install_script=$extdir/kvg--$next.sql
upgrade_script=$extdir/kvg--$current--$next.sql
if [ -e "$install_script" ] || [ -e "$upgrade_script" ]; then
  # Left by an interrupted run, or installed by something else: not ours to keep.
  echo "# removing stale $install_script / $upgrade_script"
fi
written=("$install_script" "$upgrade_script")

# The fresh install of $next: today's script with a column in the knowledge
# table's CREATE TABLE (where a schema author would write it), its index,
# and a new function, commented and granted like every other.
function_sql() {  # function_sql DEFAULT COMMENT(yes|no) REVOKE(yes|no)
  echo "CREATE FUNCTION public.kvg_upgrade_probe(x integer DEFAULT $1) RETURNS integer"
  echo "LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS \$\$ SELECT x + 1 \$\$;"
  [ "$2" = yes ] && echo "COMMENT ON FUNCTION public.kvg_upgrade_probe(integer) IS 'The throwaway change of the upgrade test.';"
  [ "$3" = yes ] && echo "REVOKE EXECUTE ON FUNCTION public.kvg_upgrade_probe(integer) FROM PUBLIC;"
  echo "GRANT EXECUTE ON FUNCTION public.kvg_upgrade_probe(integer) TO kvg_user;"
}
column="reviewed_by name CHECK (reviewed_by <> '')"
if ! python3 - "sql/kvg--$current.sql" "$column" >"$work/fresh.sql" <<'PY'; then
import sys
text = open(sys.argv[1]).read()
start = text.index("CREATE TABLE kvg.knowledge (")
end = text.index("\n);", start)
sys.stdout.write(text[:end] + ",\n  " + sys.argv[2] + text[end:])
PY
  not_ok "the throwaway change applies to sql/kvg--$current.sql (no CREATE TABLE kvg.knowledge? update this test)"
  echo "1..$n"
  exit 1
fi
{
  echo "CREATE INDEX ON kvg.knowledge (reviewed_by);"
  function_sql 1 yes yes
} >>"$work/fresh.sql"
cp "$work/fresh.sql" "$install_script"

# upgrade_script COLUMN INDEX(yes|no) FUNCTION-ARGS...: writes the upgrade script.
write_upgrade() {
  local col=$1 index=$2
  shift 2
  {
    echo "ALTER TABLE kvg.knowledge ADD COLUMN $col;"
    [ "$index" = yes ] && echo "CREATE INDEX ON kvg.knowledge (reviewed_by);"
    function_sql "$@"
  } >"$upgrade_script"
}

write_upgrade "$column" yes 1 yes yes
if compare "$current" "$next"; then
  ok "the throwaway upgrade $current -> $next gives the catalog of a fresh $next"
else
  not_ok "the throwaway upgrade $current -> $next gives the catalog of a fresh $next"
fi

# The snapshot sees the change at all: $current and $next differ where they should.
fresh_db kvg_upgrade_path && psql -X -q -d kvg_upgrade_path -c "CREATE EXTENSION kvg VERSION '$current'" >/dev/null &&
  snapshot kvg_upgrade_path "$work/current.txt"
if diff "$work/current.txt" "$work/fresh.txt" >"$work/change" ||
  ! grep -q 'kvg.knowledge.reviewed_by | #' "$work/change" || ! grep -q 'kvg_upgrade_probe(integer)' "$work/change" ||
  ! grep -q 'knowledge_reviewed_by_idx' "$work/change"; then
  sed 's/^/# /' "$work/change"
  not_ok "the catalog snapshot shows the throwaway change (column, index, function)"
else
  ok "the catalog snapshot shows the throwaway change (column, index, function)"
fi

# Wrong upgrade scripts, each a small slip, each must be caught.
caught() {  # caught WHAT COLUMN INDEX FUNCTION-ARGS...
  local what=$1
  shift
  write_upgrade "$@"
  if compare "$current" "$next" >"$work/wrong.log" 2>&1; then
    not_ok "an upgrade script whose $what is caught"
  elif grep -q '^# [-+][a-z]' "$work/wrong.log"; then
    ok "an upgrade script whose $what is caught, with the diff"
    grep '^# [-+][a-z]' "$work/wrong.log"
  else
    cat "$work/wrong.log"
    not_ok "an upgrade script whose $what is caught, with the diff"
  fi
}
caught "function lacks its comment" "$column" yes 1 no yes
caught "function has another default" "$column" yes 2 yes yes
caught "function stays executable by PUBLIC" "$column" yes 1 yes no
caught "column has another type" "reviewed_by text CHECK (reviewed_by <> '')" yes 1 yes yes
caught "index is missing" "$column" no 1 yes yes
caught "column has another CHECK" "reviewed_by name CHECK (length(reviewed_by) > 0)" yes 1 yes yes

echo "1..$n"
[ "$failures" = 0 ]
