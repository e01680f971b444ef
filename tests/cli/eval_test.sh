#!/usr/bin/env bash
# `kvg eval` end to end: a user's JSONL on a story model (every phase runs,
# grafted answers replay exactly), the built-in generator (deterministic,
# training and evaluation questions disjoint), and the errors a user meets
# (a malformed line, an unknown verifier, an empty file: each names the
# file and line). With the vendored reader model, the flywheel's effect on
# a small evaluation set. Usage: eval_test.sh KVG DATA_DIR. Exits 77 (ctest:
# skipped) when a model is missing, or 1 under CI=true.
set -u
kvg=$1
data=${KVG_TEST_DATA:-$2}
story=$data/models/stories260K.gguf
reader=$data/models/digit-rule-reader.gguf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check_lib.sh"
need_files "$story" "$reader"
json() {  # json FILE PYTHON-EXPRESSION-ON-d: exit 0 when it is true
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if eval("(" + sys.argv[2] + ")") else 1)' "$1" "$2"
}

# A user's questions on a story model: stories as solutions, questions as
# sentences to complete (the layout these models continue).
cat >"$tmp/stories.jsonl" <<'JSONL'
{"question": "Lily had a", "answer": "red", "solution": "Lily had a red ball. She played with her red ball every day."}
{"question": "Tom had a", "answer": "blue", "verifier": "contains", "solution": "Tom had a blue kite. Tom loved his blue kite."}

{"question": "Sue had a cat named", "answer": "Max", "verifier": "exact:Max", "solution": "Sue had a cat named Max. Max was a good cat."}
{"question": "Lily played with her", "answer": "red", "verifier": "contains"}
{"question": "Tom loved his", "answer": "blue", "verifier": "regex:blue"}
JSONL
layout=$'{solution}\n{question}'  # the layout the story models continue (docs/flywheel.md)
story_eval() {
  "$kvg" eval --model "$story" --questions "$tmp/stories.jsonl" --template "$layout" --learn 3 --max-tokens 8 \
    --check 4 --json >"$tmp/story.json"
}
check "eval on a user's JSONL with a story model: every phase, grafted answers exact" story_eval
check "its JSON: cold, recurring and transfer with every field" json "$tmp/story.json" "
  all(set(d[p]) >= {'accuracy', 'questions', 'decode_tokens_mean', 'prefill_tokens_mean', 'grafted_tokens_mean',
                    'ms_mean', 'flops_mean'} and 0 <= d[p]['accuracy'] <= 1 for p in ('cold', 'recurring', 'transfer'))
  and d['cold']['questions'] == 5 and d['recurring']['questions'] == 3 and d['transfer']['questions'] == 2"
check "cold grafts nothing; recurring grafts the entries' prompts; transfer is routed to related entries" json \
  "$tmp/story.json" "d['cold']['grafted_tokens_mean'] == 0 and d['recurring']['grafted_tokens_mean'] > 10
  and d['recurring']['modes'] == {'recurring': 3} and d['transfer']['modes'].get('transfer', 0) == 2
  and d['transfer']['grafted_tokens_mean'] > 5"
check "every sampled grafted answer's logits equal recomputation" json "$tmp/story.json" \
  "d['graft_check']['checked'] == 4 and d['graft_check']['exact'] == 4"
check "the table names the phases and the graft check" bash -c "
  '$kvg' eval --model '$story' --questions '$tmp/stories.jsonl' --learn 3 --max-tokens 4 --check 1 2>/dev/null |
    grep -q '^recurring ' && '$kvg' eval --model '$story' --questions '$tmp/stories.jsonl' --learn 3 --max-tokens 4 \
    --check 1 2>/dev/null | grep -q '^graft_check: 1 of 1 '"

# Errors name the file and the line.
printf '{"question": "a", "answer": "b"}\n{"question": "a", "answer": }\n' >"$tmp/malformed.jsonl"
printf '{"question": "a", "answer": "b"}\n\n{"question": "c", "answer": "d", "verifier": "public.is_red"}\n' >"$tmp/verifier.jsonl"
: >"$tmp/empty.jsonl"
printf '{"question": "a"}\n' >"$tmp/noanswer.jsonl"
for case in "malformed:malformed.jsonl:2: not a JSON object line" "verifier:verifier.jsonl:3: unknown verifier" \
            "empty:empty.jsonl: the file holds no questions" "noanswer:noanswer.jsonl:1: \"answer\" is missing"; do
  name=${case%%:*}
  want=${case#*:}
  check "$name: a clear error naming the line, exit 2" bash -c "
    '$kvg' eval --model '$story' --questions '$tmp/$name.jsonl' >'$tmp/e.out' 2>'$tmp/e.err'; rc=\$?
    [ \$rc = 2 ] && grep -qF -- '$want' '$tmp/e.err'"
done
check "neither --questions nor --generator is an error" bash -c "! '$kvg' eval --model '$story' 2>/dev/null"
check "an unknown generator is an error naming the known ones" bash -c "
  ! '$kvg' eval --generator nope --dump - 2>'$tmp/g.err' && grep -q 'digit-rule' '$tmp/g.err'"

# The generator: the same seed, the same questions; questions reserved for
# training never in an evaluation set.
check "a seed makes the same questions every time, another seed others" bash -c "
  '$kvg' eval --generator digit-rule --seed 5 --count 50 --dump '$tmp/a' &&
  '$kvg' eval --generator digit-rule --seed 5 --count 50 --dump '$tmp/b' && cmp -s '$tmp/a' '$tmp/b' &&
  ! '$kvg' eval --generator digit-rule --seed 6 --count 50 --dump - | cmp -s - '$tmp/a'"
check "evaluation sets mix seen and unseen families; training sets hold seen ones only, other questions" bash -c "
  '$kvg' eval --generator digit-rule --seed 1 --count 2000 --dump '$tmp/ev' &&
  '$kvg' eval --generator digit-rule --seed 2 --count 2000 --dump - >>'$tmp/ev' &&
  '$kvg' eval --generator digit-rule --seed 101 --count 12000 --training-split --dump '$tmp/tr' &&
  grep -q '\"kind\": \"unseen\"' '$tmp/ev' && grep -q '\"kind\": \"seen\"' '$tmp/ev' &&
  ! grep -q '\"kind\": \"unseen\"' '$tmp/tr'"
# A rule goes by two names: training sets use only the first (K10..K49), so a
# seen rule's second name (K50..K89) is a family no model trained on. The
# split is by rule and digits, so no evaluation question is a training
# question under its other name: the solutions, name cut off, never meet.
check "a seen rule's two names both in evaluation sets, only the first in training; no question in both, by either name" \
  python3 -c "
import json, sys
ev = [json.loads(l) for l in open('$tmp/ev')]
tr = [json.loads(l) for l in open('$tmp/tr')]
number = lambda it: int(it['family'][1:])
rule = lambda it: it['solution'].split(':')[1].split('|')[0]
nameless = lambda it: it['solution'].replace(it['family'] + ' ', '')
seen_ev = [it for it in ev if it['kind'] == 'seen']
first = {it['family']: rule(it) for it in tr}
second = {it['family']: rule(it) for it in seen_ev if number(it) >= 50}
ok = (all(10 <= number(it) <= 49 for it in tr) and len(first) == 32
      and all(10 <= number(it) <= 89 for it in ev) and len(second) == 32
      and sorted(first.values()) == sorted(second.values())
      and {nameless(it) for it in ev}.isdisjoint({nameless(it) for it in tr}))
sys.exit(0 if ok else 1)"

# The reader model on 200 questions of a seed it never saw (the full figures,
# 500 questions on two seeds, are in docs/flywheel.md). With two names per
# rule a set of 200 leaves about half the held-out questions a deposited
# entry of their family, enough for transfer to show. These hold for the
# vendored model and failed for the one before it (its recurring answers
# took a ninth of cold's tokens).
reader_eval() {
  "$kvg" eval --model "$reader" --generator digit-rule --seed 99 --count 200 --template "$layout" --check 4 --json \
    >"$tmp/reader.json"
}
check "the reader evaluates end to end: every sampled grafted answer exact" reader_eval
# Cold, an unseen rule is right only when the rule the model writes for a
# name it never saw happens to be the hidden one; a seen rule when the name
# is the one it learned the rule under (half of them).
check "its figures: recurring grafts all but one prompt token, cold decodes the worked solution, unseen rules are mostly wrong cold" \
  json "$tmp/reader.json" "
  d['graft_check']['exact'] == d['graft_check']['checked'] == 4
  and d['recurring']['prefill_tokens_mean'] == 1 and d['recurring']['grafted_tokens_mean'] == 85
  and d['cold']['decode_tokens_mean'] >= 75
  and d['cold']['by_kind']['unseen']['accuracy'] <= 0.25
  and d['cold']['by_kind']['unseen']['accuracy'] + 0.25 <= d['cold']['by_kind']['seen']['accuracy'] <= 0.75"
check "it reads: every recurring answer right in a tenth of cold's tokens; a related entry's solution beats cold on both kinds" \
  json "$tmp/reader.json" "
  d['recurring']['accuracy'] == 1 and d['recurring']['decode_tokens_mean'] * 10 <= d['cold']['decode_tokens_mean']
  and d['transfer']['by_kind']['unseen']['accuracy'] >= d['cold']['by_kind']['unseen']['accuracy'] + 0.5
  and d['transfer']['by_kind']['seen']['accuracy'] > d['cold']['by_kind']['seen']['accuracy']"

# The reader's first answer token, counted by the trainer's own check
# (tools/train-reader/first_token.py, no PyTorch): given the question's own
# solution it begins the short answer; given the solution of a question one
# digit away it often begins the short answer too (docs/flywheel.md: its
# weakness), which the check must count, not hide.
check "first_token.py: the reader's recurring first tokens begin the short answer; the one-digit-off weakness docs/flywheel.md reports is there (at least 10 of 40)" bash -c "
  python3 '$(dirname "$0")/../../tools/train-reader/first_token.py' --kvg '$kvg' --model '$reader' --seed 99 --count 40 \
    >'$tmp/first.json' &&
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if d[\"questions\"] == 40 and d[\"recurring_begins_worked_solution\"] <= 2 and 10 <= d[\"near_context_answers_short\"] <= 40 else 1)' '$tmp/first.json'"

echo "eval_test: $passed passed, $failed failed"
[ "$failed" = 0 ]
