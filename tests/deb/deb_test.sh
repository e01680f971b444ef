#!/usr/bin/env bash
# The Debian packages end to end (docs/packaging.md):
#  1. scripts/package-deb.sh builds them (timed);
#  2. their contents are where PostgreSQL 15 and PATH look;
#  3. lintian reports no error (its warnings are printed);
#  4. apt installs both on this machine; a private cluster (its own port,
#     KVG_PGPORT+103, run as postgres) with shared_preload_libraries = 'kvg'
#     runs CREATE EXTENSION kvg, learns a fact and answers its question from
#     the library, and the packaged kvg command generates the same text as
#     the packaged extension;
#  5. the packages are purged, the cluster removed, and any kvg files that
#     `make install` had put where the package installs are put back.
# Steps 4 and 5 write PostgreSQL's system directories, which every checkout
# on the machine shares, so they run holding KVG_PG_LOCK (default
# /tmp/kvg-pg.lock), unless a caller already holds it for us.
#
# KVG_DEB_PREBUILT=DIR skips step 1 and tests the packages in DIR.
# KVG_BUILD_DIR is passed to scripts/package-deb.sh (reuse a CPU-only build).
# Prints "ok N - ..." / "not ok N - ..." lines; exit status 1 on any failure.
set -uo pipefail
source "$(dirname "$0")/../../scripts/pg-env.sh"
out=$(realpath -m "${KVG_DEB_PREBUILT:-$repo/build-deb}")
lock=${KVG_PG_LOCK:-/tmp/kvg-pg.lock}
port=$((pg_port + 103))
model=$repo/tests/data/models/stories260K.gguf
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo -n"
n=0 failures=0
check() {  # check EXIT-STATUS DESCRIPTION
  n=$((n + 1))
  if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failures=$((failures + 1)); fi
}
finish() {
  echo "1..$n"
  if [ "$failures" -gt 0 ]; then echo "deb test: $failures of $n FAILED"; exit 1; fi
  echo "deb test: all $n passed"
  exit 0
}

# 1. Build.
if [ -z "${KVG_DEB_PREBUILT:-}" ]; then
  start=$SECONDS
  "$repo/scripts/package-deb.sh" "$out"
  check $? "scripts/package-deb.sh builds the packages ($((SECONDS - start)) s)"
fi
ext_deb=$(ls "$out"/postgresql-15-kvg_*_*.deb 2>/dev/null | head -1)
cli_deb=$(ls "$out"/kvgraft-cli_*_*.deb 2>/dev/null | head -1)
[ -f "$ext_deb" ] && [ -f "$cli_deb" ]
check $? "postgresql-15-kvg and kvgraft-cli were built"
[ -f "$ext_deb" ] && [ -f "$cli_deb" ] || finish

# 2. Contents.
version=$(dpkg-deb -f "$ext_deb" Version)
[ "$version" = "$(dpkg-parsechangelog -l "$repo/debian/changelog" -S Version)" ]
check $? "the package version is debian/changelog's ($version)"
contents=$(dpkg-deb -c "$ext_deb" | awk '{print $6}')
default_version=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$repo/kvg.control")
missing=0
for f in lib/postgresql/15/lib/kvg.so share/postgresql/15/extension/kvg.control \
  $(cd "$repo" && ls sql/kvg--*.sql | sed 's|^sql/|share/postgresql/15/extension/|'); do
  grep -qx "./usr/$f" <<<"$contents" || { echo "# not in the package: /usr/$f"; missing=1; }
done
check $missing "postgresql-15-kvg holds kvg.so, kvg.control and every sql/kvg--*.sql in PostgreSQL 15's directories"
dpkg-deb -c "$cli_deb" | awk '{print $6}' | grep -qx './usr/bin/kvg'
check $? "kvgraft-cli holds /usr/bin/kvg"
dpkg-deb -f "$ext_deb" Depends | grep -q 'postgresql-15'
check $? "postgresql-15-kvg depends on postgresql-15 ($(dpkg-deb -f "$ext_deb" Depends))"

# 3. lintian: no error.
lintian_out=$(lintian --tag-display-limit 0 "$out"/*.changes 2>&1)
echo "$lintian_out" | sed 's/^/# lintian: /'
errors=$(grep -c '^E: ' <<<"$lintian_out")
[ "$errors" = 0 ] && ! grep -q '^internal error\|^fatal' <<<"$lintian_out"
check $? "lintian reports no error ($errors errors, $(grep -c '^W: ' <<<"$lintian_out") warnings)"

# 4-5. Install, use, remove: holding the lock on PostgreSQL's directories.
holds_lock() {  # whether this process or an ancestor holds $lock
  local holders pid
  holders=$(lslocks -n -o PID,PATH 2>/dev/null | awk -v p="$lock" '$2 == p { print $1 }')
  pid=$$
  while [ -n "$pid" ] && [ "$pid" -gt 1 ]; do
    grep -qx "$pid" <<<"$holders" && return 0
    pid=$(awk '{print $4}' "/proc/$pid/stat" 2>/dev/null)
  done
  return 1
}
if ! holds_lock; then
  exec {lock_fd}>"$lock"
  echo "# waiting for $lock (other checkouts install into the same PostgreSQL)"
  flock "$lock_fd"
fi

pkglib=$(pg_config --pkglibdir)
share=$(pg_config --sharedir)/extension
# What `make install` of some checkout left where the package installs: put
# back after the purge, so the machine is as it was.
saved=$(mktemp -d /tmp/kvg-deb-saved.XXXXXX)
for f in "$pkglib/kvg.so" "$share"/kvg.control "$share"/kvg--*.sql /usr/bin/kvg; do
  [ -e "$f" ] && mkdir -p "$saved$(dirname "$f")" && cp -p "$f" "$saved$f"
done
dir=$(mktemp -d /tmp/kvg-deb.XXXXXX)  # the cluster and its socket, owned by the server's user
chmod 755 "$dir"
$sudo chown postgres: "$dir"
data=$dir/data
apt_log=$saved.apt.log
purge() {
  DEBIAN_FRONTEND=noninteractive $sudo apt-get purge -y -q -o DPkg::Lock::Timeout=300 postgresql-15-kvg kvgraft-cli \
    >>"$apt_log" 2>&1
}
restore() {
  local f
  while IFS= read -r -d '' f; do $sudo cp -p "$saved/$f" "/$f"; done < <(cd "$saved" && find . -type f -printf '%P\0')
}
cleanup() {  # on any exit: nothing of this test stays behind
  as_postgres "$pg_bin/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1
  dpkg-query -W -f='${Status}\n' postgresql-15-kvg kvgraft-cli 2>/dev/null | grep -q ' installed' && purge
  restore
  $sudo rm -rf "$dir" "$saved" "$apt_log"
}
trap cleanup EXIT

DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q -o DPkg::Lock::Timeout=300 --no-install-recommends \
  "$ext_deb" "$cli_deb" >>"$apt_log" 2>&1
status=$?
[ $status = 0 ] || tail -20 "$apt_log"
check $status "apt installs both packages (and what they depend on)"
[ $status = 0 ] || finish  # what follows would test some other kvg
[ "$(dpkg-query -W -f='${Version}' postgresql-15-kvg 2>/dev/null)" = "$version" ] &&
  cmp -s <(dpkg-deb --fsys-tarfile "$ext_deb" | tar -xOf - ./usr/lib/postgresql/15/lib/kvg.so) "$pkglib/kvg.so"
check $? "dpkg lists postgresql-15-kvg $version, and $pkglib/kvg.so is the package's"

init_private_cluster "$data" "$dir" "$port" "shared_preload_libraries = 'kvg'"
# The model where the server can read it, owned by its user.
$sudo install -D -o postgres -m 644 "$model" "$dir/models/$(basename "$model")"
as_postgres "$pg_bin/pg_ctl" -D "$data" -l "$dir/server.log" -w start >/dev/null
check $? "a cluster with shared_preload_libraries = 'kvg' starts"
export PGHOST=$dir PGPORT=$port PGUSER=postgres PGDATABASE=postgres
q() { psql -X -At -v ON_ERROR_STOP=1 "$@"; }
q -c "CREATE EXTENSION kvg" >/dev/null
check $? "CREATE EXTENSION kvg"
[ "$(q -c "SELECT extversion FROM pg_extension WHERE extname = 'kvg'")" = "$default_version" ]
check $? "the installed extension is version $default_version"
q -c "ALTER SYSTEM SET kvg.model = '$dir/models/$(basename "$model")'" -c "SELECT pg_reload_conf()" >/dev/null
sleep 1
# The README's example: a fact learned once, its question answered by
# grafting the entry's artifact, the answer checked by the entry's verifier.
learn_and_answer=(-c "SET kvg.device = cpu" -c "SET kvg.knowledge_template = E'{solution}\n{question}'")
answer=$(q "${learn_and_answer[@]}" \
  -c "SELECT kvg_learn('Zoe wore her', 'contains', 'Once upon a time, there was a girl named Zoe. Zoe had a pink dress. Zoe wore her pink dress to the party.', 'pink')" \
  -c "SELECT format('%s|%s|%s', a.mode, a.verified, a.answer) FROM kvg_answer_detail('Zoe wore her', 12) a" | tail -1)
echo "# kvg_answer_detail: $answer"
[[ "$answer" == recurring\|t\|*pink* ]]
check $? "kvg answers the learned question from the library (recurring), and its verifier accepts the answer"
[ "$(q "${learn_and_answer[@]}" -c "SELECT kvg_answer('Zoe wore her', 12)" | tail -1)" = "${answer#recurring|t|}" ] &&
  [ "$(q -c "SELECT (kvg_audit_verify()).ok")" = t ]
check $? "kvg_answer gives the same answer in another session, and the audit chain verifies"
sql_text=$(q -c "SET kvg.device = cpu" -c "SELECT kvg_generate('Once upon a time', 12)" | tail -1)
cli_text=$(/usr/bin/kvg generate --model "$model" --text 'Once upon a time' --n 12 --json |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["text"])')
echo "# kvg_generate: $sql_text"
echo "# /usr/bin/kvg: $cli_text"
[ -n "$sql_text" ] && [ "$sql_text" = "$cli_text" ]
check $? "the packaged kvg command generates the same text as the packaged extension"

as_postgres "$pg_bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null
purge
! dpkg-query -W -f='${Status}\n' postgresql-15-kvg kvgraft-cli 2>/dev/null | grep -q ' installed' &&
  [ ! -e /usr/bin/kvg ] && [ ! -e "$pkglib/kvg.so" ]
check $? "apt purges both packages: /usr/bin/kvg and kvg.so are gone"
restore
gone=0
while IFS= read -r -d '' f; do
  cmp -s "$saved/$f" "/$f" || { echo "# not restored: /$f"; gone=1; }
done < <(cd "$saved" && find . -type f -printf '%P\0')
check $gone "the kvg files make install had put there are back ($(cd "$saved" && find . -type f | wc -l) files)"
finish
