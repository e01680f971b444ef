#!/usr/bin/env bash
# The main job on a fresh machine: installs what is needed, builds the engine
# and the extension, starts a private PostgreSQL cluster (as the postgres
# user), configures a model and runs the capture → graft → generate demo.
#
#   KVG_MODEL=/path/to/model.gguf scripts/demo.sh   # any llama-family GGUF
#   scripts/demo.sh                                 # ../shared/models/stories260K.gguf, else a synthetic model
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
"$repo/scripts/install-deps.sh"
"$repo/scripts/build.sh" >/dev/null

model=${KVG_MODEL:-}
if [ -z "$model" ] && [ -f "$repo/../shared/models/stories260K.gguf" ]; then
  model=$repo/../shared/models/stories260K.gguf
fi
if [ -z "$model" ]; then
  echo "No model given. To use your own: KVG_MODEL=/path/to/model.gguf scripts/demo.sh"
  echo "Running on a synthetic model (seeded random weights): its text is noise, its exactness is real."
  model=$repo/build/demo-synth.gguf
  "$repo/build/cli/kvg" synth --out "$model" --n-embd 128 --n-layer 4 --n-head 8 --n-head-kv 4 --n-ff 384 \
    --vocab 512 --type q8_0 --seed 1 >/dev/null
fi
model=$(realpath "$model")

"$repo/scripts/pg-cluster.sh" start
source "$repo/scripts/pg-env.sh"
if [ "$(id -u)" = 0 ] && ! as_postgres test -r "$model"; then
  echo "the postgres user cannot read $model: make it (and its directories) readable" >&2
  exit 1
fi
manifest=$repo/build/demo-manifest.json
psql -X -q -d postgres -v model="$model" -v manifest="$manifest" -f "$repo/scripts/demo.sql"
echo
echo "== Manifest re-checked without the engine (scripts/kvg-manifest-check.py $manifest)"
python3 "$repo/scripts/kvg-manifest-check.py" "$manifest"
echo
echo "For the full flywheel table (both shared models, cold / solved / recurring / transfer): scripts/flywheel-demo.sh"
