# Sourced by scripts/pg-*.sh: where the private PostgreSQL cluster lives and
# how to run its programs. PostgreSQL refuses to run as root, so as root every
# server-side command runs as the `postgres` OS user.
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pg_data=$repo/.pgdata          # the cluster (gitignored)
pg_run=$repo/.pgrun            # socket directory and server log (gitignored)
pg_port=${KVG_PGPORT:-55432}
pg_bin=$(pg_config --bindir)

as_postgres() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# libpq settings for clients (psql, pg_regress, pg_prove, pg_dump).
export PGHOST=$pg_run PGPORT=$pg_port PGUSER=postgres
