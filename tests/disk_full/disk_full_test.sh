#!/usr/bin/env bash
# A full disk, and getting the space back (docs/operations.md, "When the
# disk fills"), on a small filesystem this test makes itself: a 48 MB tmpfs
# holding a tablespace, and a database in it (pg_largeobject, where the
# artifacts' bytes live, is in the database's tablespace). Its own throwaway
# cluster (port KVG_PGPORT+102, Unix socket only); WAL stays on the cluster's
# disk.
#
#  1. kvg.min_free_disk = 16MB: captures, each committed, until kvg refuses
#     with 53100 while the filesystem still has that headroom; nothing is
#     half-written, an answer that stores nothing still works. The procedure
#     (kvg_artifact_delete in batches, CHECKPOINT after each, kvg_vacuum(),
#     VACUUM pg_largeobject) runs in the
#     headroom, and captures succeed again in the space it gave back.
#  2. kvg.min_free_disk = 0 (no headroom): captures until PostgreSQL itself
#     fails with 53100; nothing is half-written. The procedure for a full
#     disk: make room outside the database first (here the ballast file the
#     runbook keeps), then the same steps; a capture succeeds again.
#
# tests/disk_full/wal_full_test.sh does the same with WAL on the small
# filesystem. Prints "ok N - ..." / "not ok N - ..." lines. Needs root (mount) and the
# extension installed (scripts/pg-cluster.sh start does that). Exits 77 when
# it cannot mount (not root, no sudo): scripts/pg-test.sh counts that as a
# skip, and as a failure under CI=true.
set -uo pipefail
source "$(dirname "$0")/../../scripts/pg-env.sh"
source "$(dirname "$0")/disk_full_lib.sh"
begin_test "disk full test" 102 diskfull
data=$dir/data     # the cluster, on the ordinary disk

echo "disk full test: cluster on port $port, a 48 MB tmpfs at $small"
mount_small disk-full 48
# The runbook's ballast: 4 MB kept on the filesystem, to delete when it fills.
$sudo fallocate -l 4M "$small/ballast"
$sudo mkdir "$small/tablespace" && $sudo chown postgres: "$small/tablespace"

# autovacuum off: the test decides when VACUUM runs (it would otherwise race
# the fill for the last free pages).
init_private_cluster "$data" "$dir" "$port" "max_connections = 10" "shared_buffers = 16MB" "autovacuum = off" \
  "shared_preload_libraries = 'kvg'" "max_worker_processes = 16" || exit 1
as_postgres "$pg_bin/pg_ctl" -D "$data" -l "$dir/server.log" -w start >/dev/null || { cat "$dir/server.log"; exit 1; }
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE TABLESPACE small LOCATION '$small/tablespace'" \
  -c "CREATE DATABASE diskfull TABLESPACE small" || exit 1
q "CREATE EXTENSION kvg" >/dev/null || exit 1
q "ALTER DATABASE diskfull SET kvg.model = '$model'" >/dev/null
q "ALTER DATABASE diskfull SET kvg.device = 'cpu'" >/dev/null
echo "# $(free_mb) MB free on the small filesystem after CREATE DATABASE"

echo "# 1. headroom: kvg.min_free_disk = 16MB"
fill_until_kvg_refuses
[ "$free" -ge 14 ]
check $? "the headroom is kept: $free MB free (at least 14 of the 16 MB)"
[ "$(consistent)" = 0 ]
check $? "nothing half-written: artifacts verify, no orphans, the audit chain verifies"
q "SELECT public.kvg_generate('Once upon a time', 8)" >/dev/null
check $? "an answer that stores no artifact still works (its audit row fits in the headroom)"
# The same size as the ones that filled it: it would not fit above the headroom.
err=$(psql -X -q -v VERBOSITY=verbose \
  -c "SELECT public.kvg_capture('One more story. ' || repeat('Once upon a time there was a girl. ', 40))" 2>&1 |
  grep -m1 '^ERROR:')
[[ "$err" == "ERROR:  53100: kvg refuses"* ]]
check $? "a further capture is refused too"
los=$(q "SELECT count(*) FROM pg_largeobject_metadata")
arts=$(q "SELECT count(*) FROM kvg.artifacts")
[ "$los" = "$arts" ]
check $? "the refused captures left no large object behind ($los objects, $arts artifacts)"
reclaim 4
check $? "the procedure runs in the headroom: kvg_artifact_delete the oldest half in 4 MB batches with a CHECKPOINT after each, kvg_vacuum(), VACUUM pg_largeobject"
echo "# $(free_mb) MB free after it: VACUUM makes the deleted pages reusable inside pg_largeobject, and returns only the file's tail to the filesystem"
read -r again err < <(fill 1000)
echo "# stored $again artifacts again, then: $err"
[ "$again" -ge $((arts / 4)) ]
check $? "captures succeed again in the space given back: $again after deleting $((arts / 2))"
[ "$(consistent)" = 0 ]
check $? "and everything verifies"

echo "# 2. no headroom (kvg.min_free_disk = 0)"
q "ALTER DATABASE diskfull SET kvg.min_free_disk = 0" >/dev/null
read -r stored err < <(fill 2000)
echo "# stored $stored artifacts, then: $err ($(free_mb) MB free)"
[[ "$err" == "ERROR:  53100: "* ]]
check $? "the full filesystem fails a capture with PostgreSQL's own 53100"
[ "$(consistent)" = 0 ]
check $? "nothing half-written: artifacts verify, no orphans, the audit chain verifies"
# Not checked (it depends on which of VACUUM's files exist already), only shown.
if vacuum_full_disk=$(psql -X -q -v VERBOSITY=verbose -c "VACUUM pg_largeobject" 2>&1); then
  echo "# VACUUM pg_largeobject on the full filesystem ran"
else
  echo "# VACUUM pg_largeobject on the full filesystem: $(grep -m1 '^ERROR:' <<<"$vacuum_full_disk")"
fi
$sudo rm "$small/ballast"
echo "# removed the 4 MB ballast: $(free_mb) MB free"
reclaim 4
check $? "with the ballast gone, the procedure runs"
[ "$(consistent)" = 0 ]
check $? "after it: artifacts verify, no orphans, the audit chain verifies"
q "SELECT public.kvg_capture('After the ballast went, the cat came back.')" >/dev/null
check $? "a capture succeeds again"

finish "disk full test" "$dir/server.log"
