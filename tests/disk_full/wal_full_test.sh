#!/usr/bin/env bash
# A full disk with WAL on it, and getting the space back without a PANIC
# (docs/operations.md, "When the disk fills"): a whole throwaway cluster,
# pg_wal included, on a small tmpfs this test makes itself (port
# KVG_PGPORT+104, Unix socket only), with 1 MB WAL segments and a
# max_wal_size of 64 MB, a third of the filesystem, which fills before
# pg_wal has grown to it. A WAL write that finds no room is not an error
# but a PANIC that stops the server; storing an artifact, deleting it and
# vacuuming it away each write about its size in WAL.
#
#  1. kvg.min_free_disk = 16MB: captures until kvg refuses with 53100,
#     keeping free what WAL may still take up to max_wal_size; the server never
#     PANICs, an answer still works. The procedure (delete in batches, each
#     followed by a CHECKPOINT, kvg_vacuum(), VACUUM pg_largeobject) runs
#     in the space kept, without a PANIC, and captures succeed again.
#  2. kvg.min_free_disk = 0 (no headroom): captures until the filesystem is
#     full, whichever way that ends (PostgreSQL's own 53100, or a PANIC when
#     WAL found no room). The emergency path: remove the ballast kept on the
#     filesystem, start the server if it stopped, lower min_wal_size and
#     max_wal_size and CHECKPOINT (which removes the WAL segments beyond
#     them), then the same procedure; no PANIC, nothing half-written, a
#     capture succeeds again.
#
# Prints "ok N - ..." / "not ok N - ..." lines. Needs root (mount) and the
# extension installed (scripts/pg-cluster.sh start does that). Exits 77 when
# it cannot mount (not root, no sudo): scripts/pg-test.sh counts that as a
# skip, and as a failure under CI=true.
set -uo pipefail
source "$(dirname "$0")/../../scripts/pg-env.sh"
source "$(dirname "$0")/disk_full_lib.sh"
begin_test "wal full test" 104 walfull
data=$small/data   # the whole cluster, on the small filesystem
log=$dir/server.log

running() { as_postgres "$pg_bin/pg_ctl" -D "$data" status >/dev/null 2>&1; }
start() { as_postgres "$pg_bin/pg_ctl" -D "$data" -l "$log" -w start >/dev/null; }
panics() { grep -c 'PANIC:' "$log"; }
wal_mb() { du -sm "$data/pg_wal" 2>/dev/null | cut -f1; }  # segments come and go as it counts
# After a PANIC the postmaster restarts the server, whose recovery needs room
# on the filesystem; it may also have given up. Waits up to 120 s.
ready() {
  local i
  for i in $(seq 240); do
    running || start >/dev/null 2>&1
    "$pg_bin/pg_isready" -q -d postgres && return 0
    sleep 0.5
  done
  return 1
}

echo "wal full test: cluster on port $port, on a 192 MB tmpfs at $small"
mount_small wal-full 192
# The runbook's ballast: 8 MB kept on the filesystem, to delete when it fills.
$sudo fallocate -l 8M "$small/ballast"
$sudo mkdir "$data" && $sudo chown postgres: "$data" && $sudo chmod 700 "$data"
# autovacuum off: the test decides when VACUUM runs.
init_private_cluster "$data" "$dir" "$port" --initdb=--wal-segsize=1 \
  "max_connections = 10" "shared_buffers = 16MB" "autovacuum = off" \
  "max_wal_size = 64MB" "min_wal_size = 8MB" \
  "shared_preload_libraries = 'kvg'" "max_worker_processes = 16" || exit 1
start || { cat "$log"; exit 1; }
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE walfull" || exit 1
q "CREATE EXTENSION kvg" >/dev/null || exit 1
q "ALTER DATABASE walfull SET kvg.model = '$model'" >/dev/null
q "ALTER DATABASE walfull SET kvg.device = 'cpu'" >/dev/null
echo "# $(free_mb) MB free on the small filesystem after CREATE DATABASE ($(wal_mb) MB in pg_wal)"

echo "# 1. headroom: kvg.min_free_disk = 16MB, with max_wal_size = 64MB"
fill_until_kvg_refuses true
echo "# $(wal_mb) MB in pg_wal"
running && [ "$(panics)" = 0 ]
check $? "the server is running, and never PANICked"
in_wal=$(wal_mb)
[ "$free" -ge $((14 + 64 - in_wal)) ]
check $? "the headroom is kept: $free MB free, at least 14 of the 16 MB beyond the $((64 - in_wal)) MB WAL may still take"
[ "$(consistent)" = 0 ]
check $? "nothing half-written: artifacts verify, no orphans, the audit chain verifies"
q "SELECT public.kvg_generate('Once upon a time', 8)" >/dev/null
check $? "an answer that stores no artifact still works"
arts=$(q "SELECT count(*) FROM kvg.artifacts")
# In one batch: one transaction, a CHECKPOINT only at the end. Its WAL (about
# twice what it deletes) grows pg_wal into the room kvg kept for it.
reclaim 1000000
check $? "the procedure runs in the headroom, even in one batch: the oldest half deleted, kvg_vacuum(), VACUUM pg_largeobject"
running && [ "$(panics)" = 0 ]
check $? "and the server did not PANIC"
echo "# $(free_mb) MB free after it"
read -r again err < <(fill 1000 true)
echo "# stored $again artifacts again, then: $err"
[ "$again" -ge $((arts / 4)) ]
check $? "captures succeed again in the space given back: $again after deleting $((arts / 2))"
running && [ "$(panics)" = 0 ] && [ "$(consistent)" = 0 ]
check $? "no PANIC, and everything verifies"

echo "# 2. no headroom (kvg.min_free_disk = 0)"
q "ALTER DATABASE walfull SET kvg.min_free_disk = 0" >/dev/null
read -r stored err < <(fill 2000 true)
echo "# stored $stored artifacts, then: $err ($(free_mb) MB free)"
if [[ "$err" == "ERROR:  53100: "* ]]; then
  check 0 "the full filesystem fails a capture with PostgreSQL's own 53100"
else
  grep -q 'PANIC:.*No space left on device' "$log"
  check $? "the full filesystem stopped the server with a PANIC: WAL found no room ($(grep -m1 PANIC: "$log" | cut -c1-160))"
fi
panics_before=$(panics)
$sudo rm "$small/ballast"
echo "# removed the 8 MB ballast: $(free_mb) MB free"
ready
check $? "the server accepts connections (recovered, or started again, after removing the ballast)"
[ "$(consistent)" = 0 ]
check $? "nothing half-written: artifacts verify, no orphans, the audit chain verifies"
before=$(free_mb)
q "ALTER SYSTEM SET min_wal_size = '2MB'" >/dev/null && q "ALTER SYSTEM SET max_wal_size = '4MB'" >/dev/null &&
  q "SELECT pg_reload_conf()" >/dev/null && q "CHECKPOINT" >/dev/null
check $? "min_wal_size and max_wal_size lowered, and a CHECKPOINT"
echo "# after it: $(free_mb) MB free (from $before), $(wal_mb) MB in pg_wal"
reclaim 4
check $? "the procedure runs in the ballast's room"
running && [ "$(panics)" = "$panics_before" ]
check $? "and the server did not PANIC"
[ "$(consistent)" = 0 ]
check $? "after it: artifacts verify, no orphans, the audit chain verifies"
q "SELECT public.kvg_capture('After the ballast went, the cat came back.')" >/dev/null
check $? "a capture succeeds again"
q "ALTER SYSTEM RESET min_wal_size" >/dev/null && q "ALTER SYSTEM RESET max_wal_size" >/dev/null &&
  q "SELECT pg_reload_conf()" >/dev/null
check $? "min_wal_size and max_wal_size put back"
echo "# $(free_mb) MB free at the end"

finish "wal full test" "$log"
