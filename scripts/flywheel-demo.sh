#!/usr/bin/env bash
# The knowledge flywheel measured on the vendored TinyStories models: for each
# model and each prompt layout, a fresh database runs scripts/flywheel-demo.sql
# (twelve story facts asked cold, solved, learned, asked again, asked with
# reuse off, and related questions) and prints its tables.
#
#   scripts/flywheel-demo.sh [MODEL.gguf ...]
#
# Default models: tests/data/models/stories260K.gguf and
# TinyStories-656K-Q8_0.gguf (copied where the server reads them). Layouts: "story" (kvg.knowledge_template =
# '{solution}\n{question}', questions are sentences to complete, the form these
# models were trained on) and "qa" (the default template, questions and an
# "Answer:" cue). Needs the private cluster (scripts/pg-cluster.sh, started here).
set -euo pipefail
source "$(dirname "$0")/pg-env.sh"
cd "$repo"

"$repo/scripts/pg-cluster.sh" start >/dev/null
models=()
for m in "$@"; do models+=("$(stage_for_server "$(realpath "$m")" models)"); done  # the server reads them
if [ ${#models[@]} -eq 0 ]; then
  models=("$pg_files/models/stories260K.gguf" "$pg_files/models/TinyStories-656K-Q8_0.gguf")
fi
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
