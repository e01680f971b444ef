# Sourced (after scripts/pg-env.sh) by tests/replica/replica_test.sh and
# scripts/bench-replica.sh: a primary and a hot standby of it on this
# machine, made with pg_basebackup -R and streaming over a Unix socket
# (docs/scale-out.md). Set before sourcing: pair_dir (data, sockets, logs),
# pport (the primary's port; the standby's is the next), pair_db.
sport=$((pport + 1))

pair_on() {  # pair_on PORT [psql args]: one session on that server, as postgres unless -U says otherwise
  local port=$1
  shift
  psql -X -At -q -h "$pair_dir" -p "$port" -d "$pair_db" -v ON_ERROR_STOP=1 "$@"
}
p() { pair_on "$pport" "$@"; }
s() { pair_on "$sport" "$@"; }

pair_stop() {  # pair_stop primary|standby [fast|immediate]
  as_postgres "$pg_bin/pg_ctl" -D "$pair_dir/$1" -m "${2:-fast}" -w stop >/dev/null 2>&1
}
pair_start() {  # pair_start primary|standby
  as_postgres "$pg_bin/pg_ctl" -D "$pair_dir/$1" -l "$pair_dir/$1.log" -w -t 120 start >/dev/null ||
    { tail -20 "$pair_dir/$1.log"; return 1; }
}
pair_remove() {  # (neither server need be running)
  pair_stop standby immediate || true
  pair_stop primary immediate || true
  rm -rf "$pair_dir"
}

# Waits until the standby has replayed everything the primary has written.
pair_wait_replay() {
  local lsn
  lsn=$(p -c "SELECT pg_current_wal_lsn()") || return 1
  for _ in $(seq 1 600); do
    [ "$(s -c "SELECT coalesce(pg_last_wal_replay_lsn() >= '$lsn'::pg_lsn, false)" 2>/dev/null)" = t ] && return 0
    sleep 0.1
  done
  echo "the standby did not replay up to $lsn" >&2
  return 1
}

# pair_create MODEL [postgresql.conf lines]: a fresh primary with kvg in
# $pair_db (kvg.model = MODEL, cpu), the roles replica_alice (kvg_user) and
# standby_audit (kvg_audit_writer, which the standby's kvg.audit_conninfo
# uses), and a running standby that has replayed it all.
pair_create() {
  local model=$1 conf=${2:-}
  pair_remove
  mkdir -p "$pair_dir"
  if [ "$(id -u)" = 0 ]; then chown postgres: "$pair_dir"; fi
  chmod 755 "$pair_dir"
  as_postgres "$pg_bin/initdb" -D "$pair_dir/primary" -U postgres --auth=trust -E UTF8 --no-locale >/dev/null || return 1
  cat >>"$pair_dir/primary/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$pair_dir'
port = $pport
max_connections = 40
shared_buffers = 64MB
wal_level = replica
max_wal_senders = 4
# kvg is loaded at server start: its settings, and its audit writers
# (background workers, one per database with calls in flight).
shared_preload_libraries = 'kvg'
max_worker_processes = 16
$conf
CONF
  pair_start primary || return 1
  psql -X -q -h "$pair_dir" -p "$pport" -d postgres -c "CREATE DATABASE $pair_db" || return 1
  p -c "CREATE EXTENSION kvg" \
    -c "ALTER DATABASE $pair_db SET kvg.model = '$model'" -c "ALTER DATABASE $pair_db SET kvg.device = 'cpu'" \
    -c "CREATE ROLE replica_alice LOGIN IN ROLE kvg_user" \
    -c "CREATE ROLE standby_audit LOGIN IN ROLE kvg_audit_writer" >/dev/null || return 1
  as_postgres "$pg_bin/pg_basebackup" -h "$pair_dir" -p "$pport" -U postgres -D "$pair_dir/standby" -R -X stream \
    --checkpoint=fast >/dev/null || return 1
  cat >>"$pair_dir/standby/postgresql.conf" <<CONF
port = $sport
kvg.audit_conninfo = 'host=$pair_dir port=$pport user=standby_audit'
CONF
  pair_start standby && pair_wait_replay
}
