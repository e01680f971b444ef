#!/usr/bin/env bash
# An auditor reproduces audit rows (docs/audit-chain.md), against a running
# server with kvg installable (scripts/pg-test.sh runs it on its cluster):
#   - a sampled kvg_generate (temperature 0.8, seed 4242): its manifest row
#     carries both; `kvg reproduce` recomputes its output byte for byte, and
#     says DIFFERS (exit 1) for a row whose output_sha256 was changed;
#   - a recurring flywheel answer, from its question, template and entry's
#     solution;
#   - the offline checker prints the head the chain ends on and accepts it
#     with --expect-head, refusing another.
# Usage: reproduce_test.sh KVG MODEL
set -u
kvg=$1
model=$2
db=kvg_reproduce
fails=0
ok() { if [ "$2" = 0 ]; then echo "ok - $1"; else echo "not ok - $1"; fails=$((fails + 1)); fi; }
q() { psql -X -At -v ON_ERROR_STOP=1 -d $db -c "$1"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
PGOPTIONS='-c client_min_messages=warning' psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" \
  -c "CREATE DATABASE $db" || exit 1
q "CREATE EXTENSION kvg" >/dev/null || exit 1
q "ALTER DATABASE $db SET kvg.model = '$model'" >/dev/null
q "ALTER DATABASE $db SET kvg.device = 'cpu'" >/dev/null
row() { q "SELECT kvg_manifest(seq, seq)->'entries'->0 FROM kvg.audit WHERE id = $1" >"$2"; }

prompt='Once upon a time there was a little dog'
id=$(q "SELECT max(id) FROM kvg.audit" | sed 's/^$/0/')
q "SELECT kvg_generate('$prompt', 24, temperature => 0.8, seed => 4242)" >/dev/null || exit 1
id=$(q "SELECT id FROM kvg.audit WHERE operation = 'generate' AND id > $id")
row "$id" "$tmp/sampled.json"
[ "$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["temperature"], r["seed"], r["max_tokens"], r["stop_reason"] in ("eos", "max_tokens"))' "$tmp/sampled.json")" = "0.8 4242 24 True" ]
ok "the sampled row's manifest entry carries temperature 0.8, seed 4242, max_tokens and stop_reason" $?
out=$("$kvg" reproduce --row "$tmp/sampled.json" --model "$model" --text "$prompt" 2>&1)
[[ "$out" == *"REPRODUCED"* ]]
ok "kvg reproduce recomputes the sampled row's output byte for byte" $?
echo "# $out"
python3 - "$tmp/sampled.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["output_sha256"] = ("0" if r["output_sha256"][0] != "0" else "1") + r["output_sha256"][1:]
json.dump(r, open(sys.argv[1] + ".bad", "w"))
PY
"$kvg" reproduce --row "$tmp/sampled.json.bad" --model "$model" --text "$prompt" >/dev/null 2>&1
[ $? = 1 ]
ok "a row whose output_sha256 was changed does not reproduce (exit 1)" $?
"$kvg" reproduce --row "$tmp/sampled.json" --model "$model" --text "$prompt." >/dev/null 2>&1
[ $? != 0 ]
ok "a prompt that is not the row's is refused" $?

question='What color is the sky?'
solution='The sky is blue.'
q "SELECT kvg_learn('$question', 'contains', '$solution', 'blue')" >/dev/null || exit 1
id=$(q "SELECT audit_id FROM kvg_answer_detail('$question') WHERE mode = 'recurring'")
row "${id:-0}" "$tmp/answer.json"
template=$(q "SHOW kvg.knowledge_template")
out=$("$kvg" reproduce --row "$tmp/answer.json" --model "$model" --question "$question" --template "$template" \
  --context "$solution" 2>&1)
[[ "$out" == *"REPRODUCED"* ]]
ok "kvg reproduce recomputes a recurring flywheel answer from its question, template and solution" $?
echo "# $out"

q "SELECT kvg_manifest()" >"$tmp/manifest.json"
head=$(q "SELECT last_hash FROM kvg.audit_head")
out=$(python3 scripts/kvg-manifest-check.py "$tmp/manifest.json" --expect-head "$head" 2>&1)
[ $? = 0 ] && [[ "$out" == *"head $head"* ]]
ok "the checker prints the head it ends on and accepts it as --expect-head" $?
python3 scripts/kvg-manifest-check.py "$tmp/manifest.json" --expect-head "$(printf '%064d' 0)" >/dev/null 2>&1
[ $? = 1 ]
ok "the checker refuses another expected head" $?

PGOPTIONS='-c client_min_messages=warning' psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db"
echo "reproduce: $((7 - fails)) passed, $fails failed"
exit $fails
