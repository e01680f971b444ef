#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, -fsanitize=fuzzer,address,undefined)
# and runs each from its committed seed corpus (tests/data/fuzz-corpus/<name>,
# with the other test data since it holds .gguf files; new inputs go to a copy).
#   tests/fuzz/fuzz.sh [BUILD_DIR]
#       the test command's short run: KVG_FUZZ_SECONDS (default 20) each,
#       one line per harness ("no crash" or FAILED)
#   tests/fuzz/fuzz.sh --seconds N [--jobs J] [--only NAME] [BUILD_DIR]
#       a long run (the issue asks for N >= 600): J harnesses at a time
#       (default 1), then a table of seconds, executions, coverage (cov:
#       covered edges, ft: features) and crashes per harness, from
#       libFuzzer's final stats. The grown corpora stay in BUILD_DIR/fuzz.
#   exit 0: no crash; 1: a crash or a harness that does not build; 77: no clang/libFuzzer
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
seconds=${KVG_FUZZ_SECONDS:-20}
table=false
jobs=1
names=(gguf artifact tokenizer chat_template)
build=$repo/build
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=$2; table=true; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --only) names=("$2"); shift 2 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
out=$build/fuzz
cxx=$(command -v clang++-14 || command -v clang++) || { echo "fuzz: no clang++: skipped"; exit 77; }
mkdir -p "$out"
flags=(-std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -ffp-contract=off
       -I"$repo" -DNDEBUG)
declare -A sources=(
  [gguf]="engine/gguf/gguf_file.cpp engine/gguf/mapping_guard.cpp"
  [artifact]="$(cd "$repo" && ls storage/*.cpp | tr '\n' ' ')"
  [tokenizer]="engine/gguf/gguf_file.cpp engine/gguf/mapping_guard.cpp engine/pretokenizer.cpp $(cd "$repo" && ls engine/tokenizer*.cpp | tr '\n' ' ')"
  [chat_template]="engine/chat_template.cpp engine/chat_messages.cpp"
)
export KVG_FUZZ_MODEL=${KVG_FUZZ_MODEL:-${KVG_TEST_DATA:-$repo/tests/data}/models/stories260K.gguf}
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

build_harness() {  # name -> 0 when BUILD_DIR/fuzz/fuzz_<name> is up to date
  local name=$1 bin=$out/fuzz_$1
  # Headers count too: a harness is stale when anything it may include changed.
  if [ ! -x "$bin" ] ||
     [ -n "$(cd "$repo" && find tests/fuzz/fuzz_$name.cpp ${sources[$name]} common engine storage -name '*.[ch]pp' \
              -newer "$bin")" ]; then
    (cd "$repo" && "$cxx" "${flags[@]}" "tests/fuzz/fuzz_$name.cpp" ${sources[$name]} -lcrypto -lpcre2-8 -lpthread -o "$bin")
  fi
}

run_harness() {  # name -> libFuzzer's exit status; its log in BUILD_DIR/fuzz/fuzz_<name>.log
  local name=$1 corpus=$out/corpus_$1
  rm -rf "$corpus" && mkdir -p "$corpus" && cp "$repo/tests/data/fuzz-corpus/$name/"* "$corpus/" 2>/dev/null
  (cd "$out" && "$out/fuzz_$name" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 "$corpus" >"$out/fuzz_$name.log" 2>&1)
}

report_line() {  # name status -> one table row from the log's final stats
  local log=$out/fuzz_$1.log status=$2
  local execs time cov ft crashes
  execs=$(grep -Eo 'stat::number_of_executed_units: [0-9]+' "$log" | grep -Eo '[0-9]+$')
  time=$(grep -Eo 'Done [0-9]+ runs in [0-9]+ second' "$log" | grep -Eo '[0-9]+ second' | grep -Eo '[0-9]+')
  # The last status line libFuzzer printed ("#N DONE cov: C ft: F ..." after a clean run).
  cov=$(grep -Eo 'cov: [0-9]+' "$log" | tail -1 | grep -Eo '[0-9]+')
  ft=$(grep -Eo 'ft: [0-9]+' "$log" | tail -1 | grep -Eo '[0-9]+')
  crashes=$(grep -c '^==[0-9]*==ERROR\|runtime error\|deadly signal\|ERROR: libFuzzer' "$log")
  [ "$status" = 0 ] || [ "$crashes" != 0 ] || crashes="exit $status"
  printf '| fuzz_%s | %s | %s | %s | %s | %s |\n' "$1" "${time:-?}" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$crashes"
}

failed=0
runnable=()
for name in "${names[@]}"; do
  if build_harness "$name"; then runnable+=("$name"); else echo "fuzz_$name: does not build"; failed=1; fi
done

if ! $table; then
  for name in "${runnable[@]}"; do
    if run_harness "$name"; then
      echo "fuzz_$name: $(grep -Eo 'Done [0-9]+ runs in [0-9]+ second' "$out/fuzz_$name.log" | tail -1)s, no crash (ASan, UBSan)"
    else
      echo "fuzz_$name: FAILED"; grep -A30 "ERROR\|runtime error" "$out/fuzz_$name.log" | head -40; failed=1
    fi
  done
  exit $failed
fi

# Long runs, at most $jobs at a time; each harness's exit status in a file.
for name in "${runnable[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  echo "fuzz_$name: running ${seconds}s ($(date -u +%H:%M:%S) UTC)"
  (run_harness "$name"; echo $? >"$out/fuzz_$name.status") &
done
wait
echo
echo "| harness | seconds | execs | cov | ft | crashes |"
echo "| --- | --- | --- | --- | --- | --- |"
for name in "${runnable[@]}"; do
  status=$(cat "$out/fuzz_$name.status")
  report_line "$name" "$status"
  if [ "$status" != 0 ]; then failed=1; fi
done
for name in "${runnable[@]}"; do
  if [ "$(cat "$out/fuzz_$name.status")" != 0 ]; then
    echo; echo "fuzz_$name:"; grep -A30 "ERROR\|runtime error" "$out/fuzz_$name.log" | head -40
  fi
done
exit $failed
