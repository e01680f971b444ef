#!/usr/bin/env bash
# A private PostgreSQL cluster for developing and testing kvg: data in
# <repo>/.pgdata, Unix socket only (no TCP), in <repo>/.pgrun, port 55432
# (override with KVG_PGPORT). Every command is idempotent.
#
#   scripts/pg-cluster.sh start        initdb if needed, install kvg, start
#   scripts/pg-cluster.sh stop
#   scripts/pg-cluster.sh status
#   scripts/pg-cluster.sh psql [ARGS]  psql as postgres (database postgres by default)
set -euo pipefail
source "$(dirname "$0")/pg-env.sh"

# As root the server runs as postgres, which must reach the repository (for
# the fixture files the tests read server-side) and own the cluster.
prepare_dirs() {
  mkdir -p "$pg_data" "$pg_run"
  if [ "$(id -u)" = 0 ]; then
    chown postgres: "$pg_data" "$pg_run"
    chmod 700 "$pg_data"
    local dir=$repo
    while [ "$dir" != / ]; do
      as_postgres test -x "$dir" || chmod o+x "$dir"
      dir=$(dirname "$dir")
    done
  fi
}

initdb_once() {
  [ -f "$pg_data/PG_VERSION" ] && return
  as_postgres "$pg_bin/initdb" -D "$pg_data" -U postgres --auth=trust -E UTF8 --no-locale >/dev/null
  cat >>"$pg_data/postgresql.conf" <<CONF

# kvg private test cluster (scripts/pg-cluster.sh)
listen_addresses = ''
unix_socket_directories = '$pg_run'
port = $pg_port
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 20
shared_buffers = 64MB
CONF
}

running() { as_postgres "$pg_bin/pg_ctl" -D "$pg_data" status >/dev/null 2>&1; }

case "${1:-}" in
  start)
    prepare_dirs
    initdb_once
    make -s -C "$repo" -f Makefile.pgxs install >/dev/null
    if ! running; then
      as_postgres "$pg_bin/pg_ctl" -D "$pg_data" -l "$pg_run/server.log" -w start >/dev/null
    fi
    echo "kvg cluster running: PGHOST=$pg_run PGPORT=$pg_port PGUSER=postgres"
    ;;
  stop)
    if [ -f "$pg_data/PG_VERSION" ] && running; then
      as_postgres "$pg_bin/pg_ctl" -D "$pg_data" -m fast -w stop >/dev/null
    fi
    echo "kvg cluster stopped"
    ;;
  status)
    if [ -f "$pg_data/PG_VERSION" ] && running; then
      echo "kvg cluster running: PGHOST=$pg_run PGPORT=$pg_port PGUSER=postgres"
    else
      echo "kvg cluster not running"
      exit 3
    fi
    ;;
  psql)
    shift
    exec psql -X -d postgres "$@"
    ;;
  *)
    echo "usage: $0 start|stop|status|psql [psql args]" >&2
    exit 2
    ;;
esac
