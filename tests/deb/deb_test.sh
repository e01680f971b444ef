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
#     `make install` had put where the package installs are put back;
#     kvg packages apt had installed before the test (a user's) are purged
#     before step 4 and reinstalled, the same versions, after step 5. Where
#     no .deb of such a package is at hand (apt's cache, apt-get download),
#     steps 4 and 5 are skipped rather than lose it.
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
skip() {  # skip REASON: a TAP skip (scripts/test.sh counts it as skipped)
  n=$((n + 1))
  echo "ok $n # SKIP $1"
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

# The kvg packages apt had installed before this test: the test installs its
# own fresh, so they are purged first and reinstalled, the same versions, at
# the end. That needs each one's .deb: a copy from apt's cache, else from
# `apt-get download`. Without it the purge would lose the package for good,
# so the install and purge are skipped instead.
prior_dir=$(mktemp -d /tmp/kvg-deb-prior.XXXXXX)
chmod 755 "$prior_dir"  # apt reads the .deb files as its own user
prior_pkgs=() prior_versions=() prior_debs=()
installed_version() {  # installed_version PKG: its version where dpkg lists it installed, else nothing
  dpkg-query -W -f='${Status}|${Version}' "$1" 2>/dev/null | sed -n 's/^[a-z]* ok installed|//p'
}
prior_deb() {  # prior_deb PKG VERSION: prints a .deb of that version, copied into $prior_dir
  local cached
  cached=$(ls /var/cache/apt/archives/"$1_${2//:/%3a}"_*.deb 2>/dev/null | head -1)
  if [ -n "$cached" ]; then
    cp "$cached" "$prior_dir/" || return 1  # a copy: apt may clean its cache meanwhile
  else
    (cd "$prior_dir" && apt-get download -q "$1=$2" >/dev/null 2>&1) || return 1
  fi
  ls "$prior_dir/$1"_*.deb 2>/dev/null | head -1 | grep .
}
lost=""
for pkg in postgresql-15-kvg kvgraft-cli; do
  v=$(installed_version "$pkg")
  [ -n "$v" ] || continue
  if deb=$(prior_deb "$pkg" "$v"); then
    prior_pkgs+=("$pkg") prior_versions+=("$v") prior_debs+=("$deb")
  else
    lost+=" $pkg $v"
  fi
done
if [ -n "$lost" ]; then
  echo "# apt had installed$lost here, and no .deb of it is at hand (not in /var/cache/apt/archives; apt-get download failed):"
  echo "# the purge would lose it, so the install, use and purge are skipped (purge it yourself, or put its .deb in apt's cache)"
  skip "apt install, use and purge: they would lose the installed$lost"
  rm -rf "$prior_dir"
  finish
fi
prior_list() {  # "postgresql-15-kvg 1.0.0-1, kvgraft-cli 1.0.0-1"
  local i out=""
  for i in "${!prior_pkgs[@]}"; do out+="${out:+, }${prior_pkgs[$i]} ${prior_versions[$i]}"; done
  echo "$out"
}
reinstall_prior() {  # the packages apt had installed before, the same versions
  [ ${#prior_debs[@]} -gt 0 ] || return 0
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q -o DPkg::Lock::Timeout=300 --no-install-recommends \
    "${prior_debs[@]}" >>"$apt_log" 2>&1 || return 1
  local i
  for i in "${!prior_pkgs[@]}"; do
    [ "$(installed_version "${prior_pkgs[$i]}")" = "${prior_versions[$i]}" ] || return 1
  done
}
prior_back=false  # whether reinstall_prior ran, so that cleanup does not purge what it put back

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
cleanup() {  # on any exit: nothing of this test stays behind, and what apt had installed before is back
  as_postgres "$pg_bin/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1
  if ! $prior_back; then
    dpkg-query -W -f='${Status}\n' postgresql-15-kvg kvgraft-cli 2>/dev/null | grep -q ' installed' && purge
    if ! reinstall_prior; then
      echo "# could not reinstall $(prior_list) (see $apt_log); their .deb files stay in $prior_dir"
      prior_dir="" apt_log=""  # kept, to install by hand
    fi
  fi
  restore
  $sudo rm -rf "$dir" "$saved" ${apt_log:+"$apt_log"} ${prior_dir:+"$prior_dir"}
}
trap cleanup EXIT

if [ ${#prior_debs[@]} -gt 0 ]; then
  purge
  check $? "apt purges the kvg packages it had installed before ($(prior_list)), to reinstall them at the end"
fi

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
if [ ${#prior_debs[@]} -gt 0 ]; then
  reinstall_prior && prior_back=true  # else cleanup tries again, and keeps the .deb files if that fails too
  check $? "apt reinstalls the kvg packages it had installed before ($(prior_list))"
fi
restore
gone=0
while IFS= read -r -d '' f; do
  cmp -s "$saved/$f" "/$f" || { echo "# not restored: /$f"; gone=1; }
done < <(cd "$saved" && find . -type f -printf '%P\0')
check $gone "the kvg files make install had put there are back ($(cd "$saved" && find . -type f | wc -l) files)"
finish
