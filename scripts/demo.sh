#!/usr/bin/env bash
# The main job on a fresh machine: installs what is needed, builds the engine
# and the extension, starts a private PostgreSQL cluster (as the postgres
# user), and runs the capture → graft → generate → answer demo
# (scripts/demo.sql) in the database kvg_demo, dropped and re-created on
# every run. The cluster keeps running afterwards; the last lines say how to
# connect to it and how to stop it.
#
#   scripts/demo.sh                                 # tests/data/models/stories260K.gguf
#   KVG_MODEL=/path/to/model.gguf scripts/demo.sh   # any llama-family GGUF
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
db=kvg_demo
phases=7
phase() { echo; echo "== [$1/$phases] $2"; }

# The model first: a wrong path should fail now, not after minutes of building.
model=${KVG_MODEL:-$repo/tests/data/models/stories260K.gguf}
if [ ! -f "$model" ] || [ ! -r "$model" ]; then
  echo "demo: cannot read the model file '$model'." >&2
  echo "KVG_MODEL must name a readable GGUF file, or leave it unset for tests/data/models/stories260K.gguf." >&2
  exit 2
fi
if [ "$(head -c 4 "$model")" != GGUF ]; then
  echo "demo: '$model' is not a GGUF file (it does not start with the bytes GGUF)." >&2
  exit 2
fi
model=$(realpath "$model")
echo "model: $model ($(stat -c %s "$model") bytes)"

phase 1 "Debian packages (scripts/install-deps.sh installs only what is missing; apt can take minutes)"
"$repo/scripts/install-deps.sh"
echo "packages ready"

phase 2 "Building the engine and the kvg command (scripts/build.sh kvg)"
"$repo/scripts/build.sh" kvg

phase 3 "Starting the private PostgreSQL cluster and installing the extension (scripts/pg-cluster.sh start)"
"$repo/scripts/pg-cluster.sh" start
source "$repo/scripts/pg-env.sh"

phase 4 "Making the model readable by the server"
# The server (the postgres user, as root) reads the model itself. The default
# model was copied where it can by pg-cluster.sh; a model of yours is used
# where it is when the server can read it there, else copied next to it.
if [ "$model" = "$repo/tests/data/models/stories260K.gguf" ]; then
  server_model=$pg_files/models/stories260K.gguf
elif as_postgres test -r "$model"; then
  server_model=$model
else
  echo "the postgres user cannot read $model; copying it ($(du -h "$model" | cut -f1)) into $pg_files/models"
  server_model=$(stage_for_server "$model" models)
fi
echo "kvg.model = '$server_model'"

phase 5 "The demo (scripts/demo.sql) in a fresh database $db"
PGOPTIONS='-c client_min_messages=warning' psql -X -q -d postgres \
  -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
manifest=$repo/build/demo-manifest.json
psql -X -q -d "$db" -v model="$server_model" -v manifest="$manifest" -f "$repo/scripts/demo.sql"

phase 6 "The manifest re-checked without the engine (scripts/kvg-manifest-check.py)"
python3 "$repo/scripts/kvg-manifest-check.py" "$manifest"

phase 7 "The flywheel measured on a model that reads (kvg eval, tests/data/models/digit-rule-reader.gguf)"
# Cold vs recurring vs transfer on 200 questions of a seed the model never saw:
# half of them of rules it was never trained on, half of rules it learned,
# under the family name it learned or under one it never saw (docs/flywheel.md).
"$repo/build/cli/kvg" eval --model "$repo/tests/data/models/digit-rule-reader.gguf" --generator digit-rule \
  --seed 2026 --count 200 --template $'{solution}\n{question}' 2>/dev/null

cat <<EOF2

The cluster is still running (data in $pg_data, log in $pg_run/server.log).
  connect:     PGHOST=$pg_run PGPORT=$pg_port psql -U postgres -d $db
  kvg command: $repo/build/cli/kvg   (e.g. $repo/build/cli/kvg generate --model $model --text 'Once upon a time' -n 32)
  stop it:     KVG_PGPORT=$pg_port $repo/scripts/pg-cluster.sh stop
More: scripts/flywheel-demo.sh (the flywheel table on both test models), scripts/test.sh (every test).
EOF2
