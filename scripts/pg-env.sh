# Sourced by scripts/pg-*.sh and scripts/demo.sh: where the private PostgreSQL
# cluster lives and how to run its programs. PostgreSQL refuses to run as
# root, so as root every server-side command runs as the `postgres` OS user.
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pg_port=${KVG_PGPORT:-55432}
pg_bin=$(pg_config --bindir)

as_postgres() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# The cluster lives in the checkout (.pgdata, .pgrun: gitignored) when the
# server's user can reach it. As root the server runs as `postgres`, which may
# not be allowed through the checkout's parent directories (a clone under
# /root, or in a private temporary directory); we change no directory's
# permissions, so the cluster then lives in a root-owned directory of its own,
# named after the checkout's path: /var/tmp/kvg-pg-<hash>.
pg_home=$repo
if [ "$(id -u)" = 0 ] && ! runuser -u postgres -- test -x "$repo" 2>/dev/null; then
  pg_home=/var/tmp/kvg-pg-$(printf '%s' "$repo" | sha256sum | cut -c1-12)
fi
pg_data=$pg_home/.pgdata       # the cluster
pg_run=$pg_home/.pgrun         # socket directory and server log
# Files the server itself reads (models, test fixtures): copies that the
# server's user owns, so their originals need no permission changes.
pg_files=$pg_run/data

# server_readable PATH...: make copied files readable by the server's user.
server_readable() {
  if [ "$(id -u)" = 0 ]; then chown -R postgres: "$@"; fi
  chmod -R u+rwX,go+rX "$@"
}

# stage_for_server SRC DIR: copy SRC into $pg_files/DIR (unless an identical
# copy is there) and print the copy's path.
stage_for_server() {
  local src=$1 dir=$pg_files/$2
  local dst=$dir/$(basename "$src")
  mkdir -p "$dir"
  if ! cmp -s "$src" "$dst"; then
    cp "$src" "$dst.tmp" && mv "$dst.tmp" "$dst"
  fi
  server_readable "$pg_files"
  echo "$dst"
}

# init_private_cluster DATA SOCKET_DIR PORT [--initdb=ARG...] [SETTING...]:
# initdb DATA (with each ARG), as the server's user, for a throwaway test
# cluster: trust authentication, a Unix socket in SOCKET_DIR on PORT, no
# TCP, and each SETTING ("name = value") appended to its postgresql.conf.
init_private_cluster() {
  local data=$1 socket_dir=$2 port=$3 initdb_args=()
  shift 3
  while [ $# -gt 0 ] && [[ $1 == --initdb=* ]]; do initdb_args+=("${1#--initdb=}"); shift; done
  as_postgres "$pg_bin/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --no-locale "${initdb_args[@]}" \
    >/dev/null || return 1
  printf '%s\n' "listen_addresses = ''" "unix_socket_directories = '$socket_dir'" "port = $port" "$@" \
    >>"$data/postgresql.conf"
}

# libpq settings for clients (psql, pg_regress, pg_prove, pg_dump).
export PGHOST=$pg_run PGPORT=$pg_port PGUSER=postgres
