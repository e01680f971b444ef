#!/usr/bin/env bash
# The `kvg` command as llama.cpp's users expect it (docs/cli.md): --version,
# the short flags -m -p -n -t -r, -c and --ctx-size for --max-context,
# -ngl refused with the flag to use instead, "did you mean" for a misspelt
# flag or command, generate's timings on stderr, --threads defaulting to the
# cores, bench repeated with mean ± standard deviation, --json always one
# JSON document, and the sampling values SQL refuses refused here too
# (engine/request_limits.hpp).
# Usage: habits_test.sh KVG DATA_DIR REPO. Exits 77 (ctest: skipped) when the
# models are missing, or 1 under CI=true.
set -u
kvg=$1
data=${KVG_TEST_DATA:-$2}
repo=$3
model=$data/models/stories260K.gguf
q8=$data/models/TinyStories-656K-Q8_0.gguf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check_lib.sh"
json_doc() { python3 -c 'import json,sys; json.load(sys.stdin)'; }  # exit 0 for exactly one JSON document
export -f json_doc

# --version: the release (kvg.control's default_version), the commit, the recipes, the ISA.
release=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$repo/kvg.control")
"$kvg" --version >"$tmp/version"
check "--version names the release of kvg.control ($release)" grep -qx "kvg $release" "$tmp/version"
check "--version names the commit built" bash -c "
  c=\$(git -C '$repo' rev-parse --short=12 HEAD 2>/dev/null) || c=unknown
  grep -qE \"^commit   (\$c|\$c-dirty)\$\" '$tmp/version'" 
check "--version lists the recipes" grep -q '^recipes  f32-portable-v1, .*q8-portable-v1' "$tmp/version"
check "--version names the ISA this CPU runs" grep -qE '^isa      (scalar|avx2|avx512) ' "$tmp/version"
check "kvg help mentions --version" bash -c "'$kvg' help | grep -q -- '--version'"

# "did you mean": flags by edit distance, commands too; exit status 2 (bad usage).
check "a misspelt flag suggests the near one" bash -c "
  '$kvg' generate -m x --temprature 0.5 2>'$tmp/e'; [ \$? = 2 ] && grep -q 'unknown flag --temprature; did you mean --temperature?' '$tmp/e'"
check "a single-dash long flag suggests the double-dash one" bash -c "
  '$kvg' bench -m x -threads 2 2>&1 | grep -q 'did you mean --threads?'"
check "a flag far from every flag suggests none" bash -c "
  '$kvg' info -m x --bogus 2>&1 | grep -q 'unknown flag --bogus (--help lists' && ! '$kvg' info -m x --bogus 2>&1 | grep -q 'did you mean'"
check "a misspelt command suggests the near one" bash -c "
  '$kvg' genrate 2>'$tmp/e'; [ \$? = 2 ] && grep -q \"unknown command 'genrate'; did you mean 'generate'?\" '$tmp/e'"
check "a flag where the command goes suggests --version" bash -c "'$kvg' --verison 2>&1 | grep -q \"did you mean '--version'?\""

need_files "$model" "$q8"

# Short flags: -m -p -n -t (generate), -p -n -r (bench, as llama-bench); --name=value.
long=$("$kvg" generate --model "$model" --text Once --n 8 --threads 1)
check "generate -m M -p Once -n 8 is generate --model M --text Once --n 8" bash -c '[ -n "$1" ] && [ "$1" = "$2" ]' _ \
  "$long" "$("$kvg" generate -m "$model" -p Once -n 8 -t 2)"
check "--name=value is --name value" bash -c '[ "$1" = "$2" ]' _ "$long" "$("$kvg" generate --model="$model" --text=Once -n 8)"
check "tokenize, capture and chat take -m and -p" bash -c "
  [ \"\$('$kvg' tokenize -m '$model' -p 'Once upon a time')\" = '403 407 261 378' ] &&
  '$kvg' capture -m '$model' -p 'Once' --out '$tmp/a.kvga' >/dev/null 2>&1 &&
  '$kvg' chat -m '$model' -p Hi -n 2 --json | json_doc"

# -c N and --ctx-size N (llama.cpp's) are --max-context N: the same
# generation cut at 8 positions, the same refusal of a prompt beyond 4.
ctx() { "$kvg" generate -m "$model" -p 'Once upon a time' -n 20 "$@" 2>/dev/null; }
check "-c 8, --ctx-size 8 and --ctx-size=8 generate what --max-context 8 does, cut short by it" bash -c '
  [ "$1" = ", there was a" ] && [ "$1" = "$2" ] && [ "$1" = "$3" ] && [ "$1" = "$4" ] && [ "$1" != "$5" ]' _ \
  "$(ctx --max-context 8)" "$(ctx -c 8)" "$(ctx --ctx-size 8)" "$(ctx --ctx-size=8)" "$(ctx)"
for spelling in "--max-context 4" "-c 4" "--ctx-size 4"; do
  check "$spelling refuses a prompt of 7 tokens the same way" bash -c "
    '$kvg' generate -m '$model' -p 'Once upon a time there was' -n 2 $spelling 2>'$tmp/e'; [ \$? = 2 ] &&
    grep -qx 'kvg generate: out of range: prompt of 7 tokens exceeds the context length 4' '$tmp/e'"
done
check "generate --help lists -c with --ctx-size" bash -c "'$kvg' generate --help | grep -qE '^  -c, --max-context N .*\(also --ctx-size\)$'"

# llama.cpp's layer offload (-ngl and its spellings) is refused, exit 2, naming --device.
for c in "generate -m $model -p Once -ngl 99" "generate -m $model -p Once --n-gpu-layers 99" \
         "bench -m $model --gpu-layers=99" "chat -m $model -p Hi -ngld 1" "info -m $model -ngl 99"; do
  spelling=$(grep -oE -- ' -(ngl|ngld|-n-gpu-layers|-gpu-layers)' <<<"$c")
  check "kvg ${c%% *}:$spelling is refused, naming --device" bash -c "
    '$kvg' $c 2>'$tmp/e' >/dev/null; [ \$? = 2 ] &&
    grep -qx \"kvg ${c%% *}: invalid argument:$spelling is llama.cpp's layer offload; kvg runs the whole model on one device: use --device cuda (or cpu)\" '$tmp/e'"
done
check "--help does not list -ngl, nor suggests it" bash -c "
  ! '$kvg' generate --help | grep -q gpu && '$kvg' generate -m x -ng 9 2>&1 | grep -q 'unknown flag -ng; did you mean -n?'"

# generate's timings, as llama.cpp's, on stderr; stdout is the text, byte for
# byte what it was before the timings (the text is that of kvg 1.0.0 without them).
"$kvg" generate -m "$model" -p Once -n 16 -t 1 >"$tmp/text" 2>"$tmp/timings"
num='[0-9]+\.[0-9]{2}'
check "generate's stdout is the text alone, as before the timings" bash -c "
  printf ' upon a time, there was a little girl named Lily. She lo\n' | cmp - '$tmp/text'"
check "generate prints prompt eval, eval and total time to stderr" bash -c "
  [ \$(wc -l <'$tmp/timings') = 3 ] &&
  grep -qxE 'kvg: prompt eval time = +$num ms / +2 tokens \( +$num ms per token, +$num tokens per second\)' '$tmp/timings' &&
  grep -qxE 'kvg:        eval time = +$num ms / +15 runs   \( +$num ms per token, +$num tokens per second\)' '$tmp/timings' &&
  grep -qxE 'kvg:       total time = +$num ms / +17 tokens' '$tmp/timings'"
check "--no-perf: no timings, the same text" bash -c "
  '$kvg' generate -m '$model' -p Once -n 16 -t 1 --no-perf >'$tmp/quiet' 2>'$tmp/quiet.err' &&
  cmp '$tmp/text' '$tmp/quiet' && [ ! -s '$tmp/quiet.err' ]"
check "generate --json and chat print the timings to stderr too, stdout unchanged" bash -c "
  '$kvg' generate -m '$model' -p Once -n 4 --json 2>'$tmp/j.err' | json_doc && grep -q '^kvg:       total time' '$tmp/j.err' &&
  '$kvg' chat -m '$model' -p Hi -n 4 2>'$tmp/c.err' >/dev/null && grep -q '^kvg: prompt eval time' '$tmp/c.err'"

# --threads defaults to the cores (within 1..256), and the bits do not depend on it.
cores=$(getconf _NPROCESSORS_ONLN)
[ "$cores" -gt 256 ] && cores=256
check "--threads defaults to the cores ($cores)" bash -c "
  '$kvg' bench -m '$model' -p 8 -n 2 -r 1 --skip-memory --json | python3 -c 'import json,sys; assert json.load(sys.stdin)[\"threads\"] == $cores'"
check "--help says the default is the cores" bash -c "'$kvg' generate --help | grep -q \"default: this machine's cores, $cores;\""
sampled() { "$kvg" generate -m "$model" -p Once -n 12 --seed 3 --temperature 0.9 --top-k 20 --json "$@" | grep -o '"tokens":\[[0-9,]*\]'; }
check "sampled tokens are the same at 1, 2, 5 threads and the default" bash -c '[ -n "$1" ] && [ "$1" = "$2" ] && [ "$1" = "$3" ] && [ "$1" = "$4" ]' _ \
  "$(sampled -t 1)" "$(sampled -t 2)" "$(sampled -t 5)" "$(sampled)"
check "--threads 0 and 257 are refused" bash -c "
  ! '$kvg' generate -m '$model' -p a -n 1 -t 0 2>/dev/null && '$kvg' generate -m '$model' -p a -n 1 -t 257 2>&1 | grep -q 'must be in 1..256'"

# bench -r N: every column mean ± standard deviation of N runs; 5 by default.
"$kvg" bench -m "$model" -p 16 -n 4 -r 3 --skip-memory >"$tmp/bench3"
check "bench -r 3 says 3 runs and prints ± in each column" bash -c "
  grep -q '^runs         3 per recipe: mean ± standard deviation' '$tmp/bench3' &&
  grep -qE '^\| f32-portable-v1 \| [0-9.]+ ± [0-9.]+ \| [0-9.]+ ± [0-9.]+ \| [0-9.]+ ± [0-9.]+ \|' '$tmp/bench3'"
check "bench runs 5 times by default" bash -c "
  '$kvg' bench -m '$model' -p 8 -n 2 --skip-memory --json | python3 -c 'import json,sys; d = json.load(sys.stdin)
assert d[\"repetitions\"] == 5 and all(len(r[\"prefill\"][\"seconds\"]) == 5 for r in d[\"recipes\"])'"
check "bench's standard deviation is that of its runs" bash -c "
  '$kvg' bench -m '$model' -p 16 -n 4 -r 4 --skip-memory --json | python3 -c 'import json,sys,statistics as st; d = json.load(sys.stdin)
for r in d[\"recipes\"]:
  for phase in (\"prefill\", \"decode\"):
    p = r[phase]; tps = [p[\"tokens\"] / s for s in p[\"seconds\"]]
    assert abs(st.mean(tps) - p[\"tokens_per_s\"]) <= 1e-3 * p[\"tokens_per_s\"] + 2e-3, (phase, tps, p)
    assert abs(st.stdev(tps) - p[\"tokens_per_s_stddev\"]) <= 1e-3 * p[\"tokens_per_s\"] + 2e-3, (phase, tps, p)'"
check "bench -r 0 is refused" bash -c "'$kvg' bench -m '$model' -r 0 2>&1 | grep -q -- '--repetitions must be in 1..1000, not 0'"
check "bench refuses a prompt beyond the context" bash -c "'$kvg' bench -m '$q8' -p 600 -r 1 2>&1 | grep -q -- '--prompt-tokens must be in 1..511, not 600'"
# --sequences N: N sequences decoded in batched passes, their tokens/s summed;
# the weights are read once a pass, so the weight bandwidth is per pass.
check "bench --sequences 4 sums four sequences' tokens and says so" bash -c "
  '$kvg' bench -m '$q8' -p 8 -n 4 -r 1 -b 4 --skip-memory --json | python3 -c 'import json,sys; d = json.load(sys.stdin); r = d[\"recipes\"][0]
assert d[\"sequences\"] == 4, d
tps = 4 * 4 / r[\"decode\"][\"seconds\"][0]
assert abs(r[\"decode\"][\"tokens_per_s\"] - tps) <= 1e-3 * tps, (r, tps)
assert abs(r[\"decode\"][\"weight_gbps\"] - d[\"weight_bytes\"] / 1e9 * tps / 4) <= 1e-3 * r[\"decode\"][\"weight_gbps\"] + 1e-6, r' &&
  '$kvg' bench -m '$q8' -p 8 -n 2 -r 1 -b 3 --skip-memory | grep -q '3 sequences in batched passes'"
check "bench --sequences 0 is refused" bash -c "'$kvg' bench -m '$model' -b 0 -r 1 2>&1 | grep -q -- '--sequences must be in 1..256, not 0'"

# --json: exactly one JSON document from every command that has the flag.
check "bench --json with two recipes is one document with both" bash -c "
  '$kvg' bench -m '$q8' -p 8 -n 2 -r 2 --skip-memory --recipe f32-portable-v1,q8-portable-v1 --json >'$tmp/two.json' &&
  python3 -c 'import json,sys; d = json.load(open(sys.argv[1])); assert [r[\"recipe\"] for r in d[\"recipes\"]] == [\"f32-portable-v1\", \"q8-portable-v1\"]' '$tmp/two.json'"
for c in "info -m $model" "generate -m $model -p Once -n 4" "chat -m $model -p Hi -n 2" \
         "bench -m $model -p 8 -n 2 -r 2 --skip-memory" "bench-graft -m $model --lengths 8,16 -r 1" \
         "eval -m $model --generator digit-rule --seed 5 --count 6 --max-tokens 4 --check 1"; do
  check "kvg ${c%% *} --json prints one JSON document" bash -c "'$kvg' $c --json | json_doc"
done
# A new command with --json joins the loop above, or this fails.
check "every command with --json was checked above" bash -c "
  for c in \$('$kvg' help | awk '/^  [a-z]/ { print \$1 }'); do
    '$kvg' \$c --help | grep -q -- '  --json ' && echo \$c; done | sort | tr '\n' ' ' | grep -qx 'bench bench-graft chat eval generate info '"

# What SQL refuses, refused here too (exit 2), in the words SQL uses.
for t in NaN nan -1 inf -inf 100.5 1e999; do
  check "--temperature $t is refused" bash -c "
    '$kvg' generate -m '$model' -p Once -n 2 --temperature $t 2>'$tmp/e' >/dev/null; [ \$? = 2 ] &&
    grep -qE -- '--temperature (must be between 0 and 100 \(0 is greedy\)|expects a number)' '$tmp/e'"
done
check "--temperature 100 and 0 are accepted" bash -c "
  '$kvg' generate -m '$model' -p Once -n 2 --temperature 100 >/dev/null && '$kvg' generate -m '$model' -p Once -n 2 --temperature 0 >/dev/null"
for p in 0 -0.5 1.01 nan inf; do
  check "--top-p $p is refused" bash -c "'$kvg' generate -m '$model' -p Once -n 2 --temperature 1 --top-p $p 2>&1 | grep -q -- '--top-p must be greater than 0 and at most 1'"
done
check "--top-p is refused even when greedy would not use it" bash -c "'$kvg' generate -m '$model' -p Once -n 2 --top-p nan 2>&1 | grep -q -- '--top-p must be'"
check "--top-k -1 is refused" bash -c "'$kvg' generate -m '$model' -p Once -n 2 --top-k -1 2>&1 | grep -q -- '--top-k must be between 0 and'"
for n in 0 -5 1048577; do
  check "-n $n is refused" bash -c "'$kvg' generate -m '$model' -p Once -n $n 2>&1 | grep -qE -- '-n must be at (least 1|most 1048576)'"
done
for s in abc 1.5 18446744073709551616; do
  check "--seed $s is refused" bash -c "'$kvg' generate -m '$model' -p Once -n 2 --seed $s 2>&1 | grep -q -- '--seed expects an integer'"
done
check "--seed -1 is accepted, as SQL's bigint seed" bash -c "'$kvg' generate -m '$model' -p Once -n 2 --temperature 1 --seed -1 >/dev/null"
check "chat refuses --temperature NaN too" bash -c "'$kvg' chat -m '$model' -p Hi -n 2 --temperature NaN 2>&1 | grep -q -- '--temperature must be between 0 and 100'"
check "graft-check refuses --sample-tokens 0" bash -c "'$kvg' graft-check -m '$model' --artifact '$tmp/a.kvga' -p ' x' --sample-tokens 0 2>&1 | grep -q -- '--sample-tokens must be at least 1'"

finish habits
