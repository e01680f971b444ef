#!/usr/bin/env bash
# An auditor exports a manifest with its artifacts (scripts/kvg-audit-export.sh,
# docs/audit-export.md) and reproduces every row of it, against a running
# server with kvg installable (scripts/pg-test.sh runs it on its cluster):
#   - a mixed audit: two captures (the second continues the first), a
#     kvg_generate continuing that chain (artifact =>), a sampled
#     kvg_generate (temperature 0.8, seed), kvg_learn and a recurring
#     kvg_answer_detail (grafted), and a capture whose artifact is then
#     deleted;
#   - a role that is only in kvg_auditor exports it: manifest.jsonl passes
#     scripts/kvg-manifest-check.py, every stored file hashes to its name,
#     the deleted artifact is listed in missing.txt (not a failure); a
#     kvg_user that is no auditor is refused;
#   - `kvg reproduce --store DIR/store` says REPRODUCED for every generate
#     and answer row, and refuses every other row (capture, learn) naming
#     its operation; with the chain's root removed from the store, the
#     continuation is refused naming the missing artifact.
# Usage: audit_export_test.sh KVG MODEL
set -u
kvg=$1
model=$2
db=kvg_audit_export
auditor=kvg_audit_export_auditor
user=kvg_audit_export_user
export_sh=$(cd "$(dirname "$0")/../.." && pwd)/scripts/kvg-audit-export.sh
checker=$(cd "$(dirname "$0")/../.." && pwd)/scripts/kvg-manifest-check.py
fails=0
passed=0
ok() {
  if [ "$2" = 0 ]; then echo "ok - $1"; passed=$((passed + 1)); else echo "not ok - $1"; fails=$((fails + 1)); fi
}
q() { psql -X -At -v ON_ERROR_STOP=1 -d $db -c "$1"; }
admin() { PGOPTIONS='-c client_min_messages=warning' psql -X -q -v ON_ERROR_STOP=1 -d postgres "$@"; }
tmp=$(mktemp -d)
cleanup() {
  rm -rf "$tmp"
  admin -c "DROP DATABASE IF EXISTS $db" -c "DROP ROLE IF EXISTS $auditor" -c "DROP ROLE IF EXISTS $user"
}
trap cleanup EXIT
admin -c "DROP DATABASE IF EXISTS $db" -c "DROP ROLE IF EXISTS $auditor" -c "DROP ROLE IF EXISTS $user" \
  -c "CREATE DATABASE $db" || exit 1
q "CREATE EXTENSION kvg" >/dev/null || exit 1
q "ALTER DATABASE $db SET kvg.model = '$model'" >/dev/null
q "ALTER DATABASE $db SET kvg.device = 'cpu'" >/dev/null
admin -c "CREATE ROLE $auditor LOGIN IN ROLE kvg_auditor" -c "CREATE ROLE $user LOGIN IN ROLE kvg_user" || exit 1
sha() { printf '%s' "$1" | sha256sum | cut -c1-64; }

# The mixed audit. Each input the auditor will need is kept by its SHA-256.
declare -A text_of
story='Once upon a time there was a girl'
named=' named Lily.'
root=$(q "SELECT kvg_capture('$story')") || exit 1
leaf=$(q "SELECT kvg_capture('$named', '$root')") || exit 1
continuation=' She liked'
q "SELECT kvg_generate('$continuation', 12, artifact => '$leaf')" >/dev/null || exit 1
text_of[$(sha "$continuation")]=$continuation
sampled='Once upon a time there was a little dog'
q "SELECT kvg_generate('$sampled', 24, temperature => 0.8, seed => 4242)" >/dev/null || exit 1
text_of[$(sha "$sampled")]=$sampled
question='What color is the sky?'
solution='The sky is blue.'
q "SELECT kvg_learn('$question', 'contains', '$solution', 'blue')" >/dev/null || exit 1
mode=$(q "SELECT mode FROM kvg_answer_detail('$question')")
[ "$mode" = recurring ]
ok "the mixed audit: captures, a continuation, a sampled generate, a learn and a recurring answer" $?
doomed=$(q "SELECT kvg_capture('A story nobody grafted.')") || exit 1
q "SELECT kvg_artifact_delete('$doomed')" >/dev/null
[ "$(q "SELECT count(*) FROM kvg.artifacts WHERE sha256 = '$doomed'")" = 0 ]
ok "a captured artifact is deleted (its capture row stays)" $?
template=$(q "SHOW kvg.knowledge_template")
head=$(q "SELECT last_seq FROM kvg.audit_head")

# The export, by a role that is only in kvg_auditor.
out=$(PGUSER=$auditor PGDATABASE=$db bash "$export_sh" "$tmp/export" 2>"$tmp/export.err")
status=$?
echo "# $out"
sed 's/^/# stderr: /' "$tmp/export.err"
[ $status = 0 ] && [[ "$out" == *"$head rows"* ]] && [[ "$out" == *"1 missing"* ]]
ok "a kvg_auditor exports the manifest with its artifacts (exit 0, one missing)" $?
grep -q "^$doomed: not stored" "$tmp/export/missing.txt" 2>/dev/null && [ "$(wc -l <"$tmp/export/missing.txt")" = 1 ]
ok "missing.txt lists the deleted artifact, and nothing else" $?
grep -q "missing.txt" "$tmp/export.err"
ok "the export warns on stderr that an artifact is missing" $?
[ "$(cd "$tmp/export" && ls -A | tr '\n' ' ')" = "manifest.jsonl missing.txt store templates " ]
ok "the directory holds manifest.jsonl, missing.txt, store/ and templates/ only (no temporary files left)" $?
check=$(python3 "$checker" "$tmp/export/manifest.jsonl" 2>&1)
[ $? = 0 ]
ok "scripts/kvg-manifest-check.py accepts the exported manifest.jsonl" $?
echo "# ${check//$'\n'/ / }"

bad=0 files=0
for f in "$tmp"/export/store/*/*.kvga; do
  h=$(basename "$f" .kvga)
  files=$((files + 1))
  [ "$(sha256sum <"$f" | cut -c1-64)" = "$h" ] && [ "$(basename "$(dirname "$f")")" = "${h:0:2}" ] || bad=$((bad + 1))
done
[ $bad = 0 ] && [ $files -ge 4 ] && [ -f "$tmp/export/store/${root:0:2}/$root.kvga" ] &&
  [ -f "$tmp/export/store/${leaf:0:2}/$leaf.kvga" ]
ok "every stored file ($files) is at store/XX/H.kvga and hashes to its name; the continued chain is there" $?

n_before=$(q "SELECT count(*) FROM kvg.audit WHERE operation = 'export' AND role = '$auditor'")
[ "$n_before" = "$files" ]
ok "each artifact exported is audited (an export row by the auditor)" $?
# Again, the same rows (1..head: not the export rows appended since).
out=$(PGUSER=$auditor PGDATABASE=$db bash "$export_sh" "$tmp/export" 1 "$head" 2>/dev/null)
[ $? = 0 ] && [[ "$out" == *"$head rows (seq 1..$head)"* ]] && [[ "$out" == *"(0 exported, $files already in"* ]]
ok "exporting rows 1..$head again into the same directory keeps the verified files (none exported again)" $?
PGUSER=$user PGDATABASE=$db bash "$export_sh" "$tmp/denied" >/dev/null 2>"$tmp/denied.err"
[ $? = 1 ] && grep -q "kvg_auditor" "$tmp/denied.err"
ok "a kvg_user that is not an auditor is refused (exit 1)" $?

# Every row of the manifest, reproduced or refused: none is skipped.
mkdir "$tmp/rows"
tail -n +2 "$tmp/export/manifest.jsonl" | split -l 1 -d -a 6 - "$tmp/rows/row"
reproduced=0 refused=0
for f in "$tmp"/rows/row*; do
  read -r seq op input < <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["seq"], r["operation"], r["input_sha256"])' "$f")
  case $op in
    generate)
      if [ -z "${text_of[$input]+set}" ]; then
        ok "generate row seq $seq: its prompt is one of this test's" 1
        continue
      fi
      out=$("$kvg" reproduce --row "$f" --model "$model" --text "${text_of[$input]}" --store "$tmp/export/store" 2>&1)
      [[ "$out" == *"REPRODUCED"* ]]
      ok "generate row seq $seq reproduces from the export (--text, --store)" $?
      echo "# $out"
      reproduced=$((reproduced + 1))
      ;;
    answer)
      [ "$input" = "$(sha "$question")" ] || { ok "answer row seq $seq: its question is this test's" 1; continue; }
      # The template as the export holds it, by the hash the row names (not
      # the setting: it may have changed since).
      tsha=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["template_sha256"])' "$f")
      exported_template=$(cat "$tmp/export/templates/$tsha.txt" 2>/dev/null; printf x)
      exported_template=${exported_template%x}
      [ "$exported_template" = "$template" ]
      ok "answer row seq $seq: its template is in the export (templates/$tsha.txt)" $?
      out=$("$kvg" reproduce --row "$f" --model "$model" --question "$question" --template "$exported_template" \
        --context "$solution" --store "$tmp/export/store" 2>&1)
      [[ "$out" == *"REPRODUCED"* ]]
      ok "answer row seq $seq reproduces from the export (--question, --template, --context)" $?
      echo "# $out"
      reproduced=$((reproduced + 1))
      ;;
    *)
      # kvg reproduce recomputes outputs: a capture, learn, import or export
      # row has none to recompute (its artifact's hash is its check).
      out=$("$kvg" reproduce --row "$f" --model "$model" --text x --store "$tmp/export/store" 2>&1)
      status=$?
      [ $status != 0 ] && [[ "$out" == *"recomputes generate and answer rows, not $op"* ]]
      ok "$op row seq $seq has no output to recompute: kvg reproduce refuses it naming its operation" $?
      refused=$((refused + 1))
      ;;
  esac
done
[ $reproduced = 3 ] && [ $((reproduced + refused)) = "$head" ]
ok "every row of the manifest ($head) was reproduced ($reproduced) or refused ($refused)" $?

# A row whose artifact is not in the store: the continuation without its root.
cont=$(grep -l '"operation": "generate"' "$tmp"/rows/row* | xargs grep -l "\"artifact_sha256\": \"$leaf\"" | head -1)
rm -f "$tmp/export/store/${root:0:2}/$root.kvga"
out=$("$kvg" reproduce --row "${cont:-/nonexistent}" --model "$model" --text "$continuation" \
  --store "$tmp/export/store" 2>&1)
status=$?
[ $status != 0 ] && [[ "$out" == *"artifact $root not found in store"* ]] && [[ "$out" != *REPRODUCED* ]]
ok "with the chain's root removed from the store, the continuation is refused naming it" $?
echo "# $out"

echo "audit export: $passed passed, $fails failed"
exit $fails
