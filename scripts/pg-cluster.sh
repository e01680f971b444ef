#!/usr/bin/env bash
# A private PostgreSQL cluster for developing and testing kvg: Unix socket
# only (no TCP), port 55432 (override with KVG_PGPORT), data in <repo>/.pgdata
# and socket, log and server-readable files in <repo>/.pgrun (or, as root when
# the postgres user cannot reach the checkout, in /var/tmp/kvg-pg-<hash>: see
# scripts/pg-env.sh). Every command is idempotent.
#
#   scripts/pg-cluster.sh start        initdb if needed, install kvg, (re)start with kvg
#                                      preloaded (shared_preload_libraries),
#                                      copy the test models where the server reads them
#   scripts/pg-cluster.sh stop
#   scripts/pg-cluster.sh status
#   scripts/pg-cluster.sh psql [ARGS]  psql as postgres (database postgres by default)
set -euo pipefail
source "$(dirname "$0")/pg-env.sh"

# As root the server runs as postgres, which must own the cluster. No
# directory outside the cluster's own has its permissions changed.
prepare_dirs() {
  if [ "$pg_home" != "$repo" ]; then
    mkdir -p -m 755 "$pg_home"
    if [ "$(stat -c %u "$pg_home")" != 0 ]; then
      echo "$pg_home is not owned by root: remove it and retry" >&2
      exit 1
    fi
  fi
  mkdir -p "$pg_data" "$pg_run" "$pg_files"
  if [ "$(id -u)" = 0 ]; then
    chown postgres: "$pg_data" "$pg_run" "$pg_files"
    chmod 755 "$pg_run"
  fi
  chmod 700 "$pg_data"
}

# The test models, where the server can read them ($pg_files/models).
stage_models() {
  local m
  for m in "${KVG_TEST_DATA:-$repo/tests/data}"/models/*.gguf; do
    if [ -f "$m" ]; then stage_for_server "$m" models >/dev/null; fi
  done
}

# make install, with one line per compiled file instead of silence (the
# first run compiles the engine and extension/src and takes minutes on a small
# machine; CMake builds it, Makefile.pgxs only calls CMake).
install_extension() {
  echo "installing the kvg extension (make -f Makefile.pgxs install into $(pg_config --pkglibdir))"
  make -C "$repo" -f Makefile.pgxs -j "$(nproc 2>/dev/null || echo 2)" install |
    sed -un 's|.*Building CXX object extension/CMakeFiles/kvg_extension\.dir/\(src/[^ ]*\)\.o$|  compiling extension/\1|p'
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
# kvg is loaded at server start: its settings, and its audit writers
# (background workers, one per database with calls in flight, each kept
# for kvg.audit_writer_idle_timeout after its last row). The test command
# uses a dozen databases within a minute, two writers each.
shared_preload_libraries = 'kvg'
max_worker_processes = 32
CONF
}

running() { as_postgres "$pg_bin/pg_ctl" -D "$pg_data" status >/dev/null 2>&1; }

# A cluster made before kvg was preloaded gets the line too.
preload_once() {
  grep -q "^shared_preload_libraries = 'kvg'" "$pg_data/postgresql.conf" && return
  printf "shared_preload_libraries = 'kvg'\nmax_worker_processes = 32\n" >>"$pg_data/postgresql.conf"
}

case "${1:-}" in
  start)
    prepare_dirs
    initdb_once
    preload_once
    # KVG_EXTENSION_INSTALLED: kvg is already in this server's installation
    # (scripts/gpu-bundle.sh carries it so, to a machine without a compiler).
    [ -n "${KVG_EXTENSION_INSTALLED:-}" ] || install_extension
    stage_models
    # The postmaster loaded kvg.so at start, and every backend runs that
    # copy: a freshly installed one takes a restart.
    if running; then
      as_postgres "$pg_bin/pg_ctl" -D "$pg_data" -l "$pg_run/server.log" -o "-p $pg_port" -m fast -w restart >/dev/null
    else
      as_postgres "$pg_bin/pg_ctl" -D "$pg_data" -l "$pg_run/server.log" -o "-p $pg_port" -w start >/dev/null
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
