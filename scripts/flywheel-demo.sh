#!/usr/bin/env bash
# The knowledge flywheel measured on the shared TinyStories models: for each
# model and each prompt layout, a fresh database runs scripts/flywheel-demo.sql
# (twelve story facts asked cold, solved, learned, asked again, asked with
# reuse off, and related questions) and prints its tables.
#
#   scripts/flywheel-demo.sh [MODEL.gguf ...]
#
# Default models: ../shared/models/stories260K.gguf and
# TinyStories-656K-Q8_0.gguf. Layouts: "story" (kvg.knowledge_template =
# '{solution}\n{question}', questions are sentences to complete, the form these
# models were trained on) and "qa" (the default template, questions and an
# "Answer:" cue). Needs the private cluster (scripts/pg-cluster.sh, started here).
set -euo pipefail
source "$(dirname "$0")/pg-env.sh"
cd "$repo"

shared=$(cd "$repo/.." && pwd)/shared/models
models=("$@")
if [ ${#models[@]} -eq 0 ]; then
  for m in stories260K.gguf TinyStories-656K-Q8_0.gguf; do
    [ -f "$shared/$m" ] && models+=("$shared/$m")
  done
fi
[ ${#models[@]} -gt 0 ] || { echo "no model: pass a GGUF file" >&2; exit 1; }

"$repo/scripts/pg-cluster.sh" start >/dev/null
db=kvg_flywheel_demo
for model in "${models[@]}"; do
  for layout in story qa; do
    if [ "$layout" = story ]; then template=$'{solution}\n{question}'; else template=$'{solution}\nQuestion: {question}\nAnswer:'; fi
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null 2>&1
    psql -X -q -d "$db" -c "CREATE EXTENSION kvg"
    psql -X -d "$db" -v model="$model" -v template="$template" -v layout="$layout" -f scripts/flywheel-demo.sql
  done
done
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db"
