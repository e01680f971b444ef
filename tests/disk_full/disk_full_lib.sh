# What the disk-full tests share (sourced by disk_full_test.sh and
# wal_full_test.sh): the checks' counter, the fill, the consistency query,
# and the documented procedure (docs/operations.md, "When the disk fills").
# Sourced after scripts/pg-env.sh.

n=0 failures=0

# begin_test NAME PORT_OFFSET DATABASE: sets model (KVG_DISK_FULL_MODEL, or
# the vendored stories260K), sudo, port, dir (a fresh directory the server's
# user owns: its socket goes there) and small (where the small filesystem
# will be mounted), points libpq at DATABASE there, and cleans up at exit
# (the cluster at $data stopped, the filesystem unmounted, dir removed).
# Exits 77 when it cannot mount (not root, no sudo).
begin_test() {
  model=${KVG_DISK_FULL_MODEL:-${KVG_TEST_DATA:-$repo/tests/data}/models/stories260K.gguf}
  [ -f "$model" ] || { echo "$1: no model at $model"; exit 1; }
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    sudo -n true 2>/dev/null || { echo "$1: mounting a tmpfs needs root or sudo"; exit 77; }
    sudo="sudo -n"
  fi
  port=$((pg_port + $2))
  dir=$(mktemp -d "/tmp/kvg-$3.XXXXXX")
  chmod 755 "$dir"
  $sudo chown postgres: "$dir"
  small=$dir/small
  export PGHOST=$dir PGPORT=$port PGUSER=postgres PGDATABASE=$3
  trap end_test EXIT
}

end_test() {
  as_postgres "$pg_bin/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1
  mountpoint -q "$small" && $sudo umount "$small"
  $sudo rm -rf "$dir"
}

# mount_small NAME SIZE_MB: a tmpfs of that size at $small.
mount_small() {
  mkdir "$small"
  $sudo mount -t tmpfs -o "size=$2m,mode=755" "kvg-$1" "$small" || { echo "$1: cannot mount a tmpfs"; exit 77; }
}

check() {  # check CONDITION-EXIT-STATUS DESCRIPTION
  n=$((n + 1))
  if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failures=$((failures + 1)); fi
}
q() { psql -X -At -v ON_ERROR_STOP=1 -c "$1"; }
free_mb() { df -m --output=avail "$small" | tail -1 | tr -d ' '; }

# Captures of ~360 tokens (about 460 KB each), each in its own transaction,
# until one fails; prints how many were stored and the error, with SQLSTATE
# (or the connection's end, when the server stopped). With CHECKPOINT
# "true", a CHECKPOINT follows each, as checkpoint_timeout would on a
# server that writes slowly: pg_wal then stays near min_wal_size.
# The number comes first in the prompt, so no capture's tokens begin another's.
fill() {  # fill OFFSET [CHECKPOINT]
  local before after err
  before=$(q "SELECT count(*) FROM kvg.artifacts")
  err=$(psql -X -q -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -c "
    DO \$\$
    BEGIN
      FOR i IN 1..1000 LOOP
        PERFORM public.kvg_capture(format('Story %s. ', i + $1) || repeat('Once upon a time there was a girl. ', 40));
        COMMIT;
        IF ${2:-false} THEN CHECKPOINT; END IF;
      END LOOP;
    END \$\$" 2>&1 | grep -m1 -E '^(ERROR|FATAL|PANIC):|server closed the connection')
  after=$(q "SELECT count(*) FROM kvg.artifacts" 2>/dev/null || echo "$before")
  echo "$((after - before)) $err"
}

# Part 1 of both tests: kvg.min_free_disk = 16MB, then captures until kvg
# refuses one, checked; sets stored and free (MB on the small filesystem).
fill_until_kvg_refuses() {  # fill_until_kvg_refuses [CHECKPOINT]
  local err
  q "ALTER DATABASE $PGDATABASE SET kvg.min_free_disk = '16MB'" >/dev/null
  read -r stored err < <(fill 0 "${1:-false}")
  free=$(free_mb)
  echo "# stored $stored artifacts, then: $err ($free MB free)"
  [ "$stored" -ge 10 ]
  check $? "captures are stored until the headroom is reached ($stored)"
  [[ "$err" == "ERROR:  53100: kvg refuses to store a new artifact"*"less than kvg.min_free_disk (16 MB)"* ]]
  check $? "then kvg refuses a capture with 53100, naming kvg.min_free_disk"
}

# Nothing half-written: every artifact verifies, no large object without its
# row or row without its object, every artifact has the audit row of its
# capture, the audit chain verifies.
consistent() {
  q "SELECT (SELECT count(*) FILTER (WHERE NOT (public.kvg_artifact_verify(sha256)).ok) FROM kvg.artifacts)
          + (SELECT count(*) FROM public.kvg_orphans())
          + (SELECT count(*) FROM kvg.artifacts a WHERE NOT EXISTS
              (SELECT FROM kvg.audit u WHERE u.operation = 'capture' AND u.artifact_sha256 = a.sha256))
          + (CASE WHEN (public.kvg_audit_verify()).ok THEN 0 ELSE 1 END)"
}

# The documented procedure, as docs/operations.md gives it: delete what is no
# longer needed (here the oldest half of the artifacts, plain captures that
# kvg_artifact_delete takes without force) in batches of at most BATCH_MB,
# each committed and followed by a CHECKPOINT, so that its WAL segments are
# recycled for the next batch; then kvg_vacuum(), VACUUM pg_largeobject and
# a last CHECKPOINT.
reclaim() {  # reclaim BATCH_MB
  local half=$(( $(q "SELECT count(*) FROM kvg.artifacts") / 2 ))
  psql -X -q -v ON_ERROR_STOP=1 -c "
    DO \$\$
    DECLARE
      batch bigint := 0;
      a record;
    BEGIN
      FOR a IN SELECT sha256 FROM kvg.artifacts ORDER BY created_at, sha256 LIMIT $half LOOP
        batch := batch + public.kvg_artifact_delete(a.sha256);
        IF batch >= $1::bigint * 1024 * 1024 THEN
          COMMIT;
          CHECKPOINT;
          batch := 0;
        END IF;
      END LOOP;
      COMMIT;
      CHECKPOINT;
    END \$\$" &&
    q "SELECT public.kvg_vacuum()" >/dev/null &&
    psql -X -q -v ON_ERROR_STOP=1 -c "VACUUM pg_largeobject" -c "CHECKPOINT"
}

# The test's verdict: its plan line, and its exit status.
finish() {  # finish NAME SERVER-LOG
  echo "1..$n"
  if [ "$failures" -gt 0 ]; then
    echo "$1: $failures of $n FAILED"; tail -20 "$2"
    exit 1
  fi
  echo "$1: all $n passed"
}
