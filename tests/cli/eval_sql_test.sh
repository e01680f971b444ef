#!/usr/bin/env bash
# The flywheel evaluation from SQL (scripts/eval.sql) and from the CLI
# (kvg eval) on the same generator seed give the same figures: accuracy,
# questions, and decoded, prefilled and grafted tokens per answer, and the
# FLOPs estimate, per phase and per kind (the times differ: the server does
# more per answer). Needs a running cluster with kvg (scripts/pg-test.sh
# runs it) and an empty database DB. Usage:
#   eval_sql_test.sh KVG DATA_DIR DB [SEED COUNT]
# (default: 40 questions of seed 3; half of them are the learning part).
set -u
kvg=$1
data=$2
db=$3
seed=${4:-3}
count=${5:-40}
reader=$data/models/digit-rule-reader.gguf
tmp=$(mktemp -d)
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
layout=$'{solution}\n{question}'
"$kvg" eval --generator digit-rule --seed "$seed" --count "$count" --dump "$tmp/q.jsonl" || exit 1
chmod 644 "$tmp/q.jsonl"
"$kvg" eval --model "$reader" --generator digit-rule --seed "$seed" --count "$count" --learn $((count / 2)) --template "$layout" \
  --check 2 --json >"$tmp/cli.json" || exit 1
psql -X -At -d "$db" -v model="$reader" -v questions="$tmp/q.jsonl" -v learn=$((count / 2)) -v template="$layout" \
  -v max_tokens=96 -f "$(dirname "$0")/../../scripts/eval.sql" >"$tmp/sql.json" || exit 1
python3 - "$tmp/cli.json" "$tmp/sql.json" <<'PY'
import json, sys
cli, sql = (json.load(open(p)) for p in sys.argv[1:])
fields = ("accuracy", "questions", "decode_tokens_mean", "prefill_tokens_mean", "grafted_tokens_mean", "flops_mean")
bad = []
for phase in ("cold", "recurring", "transfer"):
    for kind in [None] + sorted(cli[phase].get("by_kind", {})):
        c = cli[phase] if kind is None else cli[phase]["by_kind"][kind]
        s = sql[phase] if kind is None else sql[phase]["by_kind"][kind]
        for f in fields:
            if abs(float(c[f]) - float(s[f])) > 1e-3 * max(1.0, abs(float(c[f]))):
                bad.append(f"{phase}/{kind or 'all'} {f}: CLI {c[f]}, SQL {s[f]}")
print("\n".join(bad) if bad else "CLI and SQL agree: " + ", ".join(
    f"{p} {cli[p]['accuracy']:.3f} in {cli[p]['decode_tokens_mean']:.1f} tokens" for p in ("cold", "recurring", "transfer")))
sys.exit(1 if bad else 0)
PY
