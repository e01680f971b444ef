#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, -fsanitize=fuzzer,address,undefined)
# and runs each for a short time (KVG_FUZZ_SECONDS, default 20) from its
# committed seed corpus (tests/data/fuzz-corpus/<name>, with the other test
# data since it holds .gguf files; new inputs go to a copy).
#   tests/fuzz/fuzz.sh [BUILD_DIR]     exit 0: no crash; 77: no clang/libFuzzer
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$repo/build}/fuzz
seconds=${KVG_FUZZ_SECONDS:-20}
cxx=$(command -v clang++-14 || command -v clang++) || { echo "fuzz: no clang++: skipped"; exit 77; }
mkdir -p "$out"
flags=(-std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -ffp-contract=off
       -I"$repo" -DNDEBUG)
declare -A sources=(
  [gguf]="engine/gguf/gguf_file.cpp"
  [artifact]="$(cd "$repo" && ls storage/*.cpp | tr '\n' ' ')"
  [tokenizer]="engine/gguf/gguf_file.cpp engine/pretokenizer.cpp $(cd "$repo" && ls engine/tokenizer*.cpp | tr '\n' ' ')"
  [chat_template]="engine/chat_template.cpp engine/chat_messages.cpp"
)
export KVG_FUZZ_MODEL=${KVG_FUZZ_MODEL:-${KVG_TEST_DATA:-$repo/tests/data}/models/stories260K.gguf}
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
failed=0
for name in gguf artifact tokenizer chat_template; do
  bin=$out/fuzz_$name
  if [ ! -x "$bin" ] || [ -n "$(cd "$repo" && find tests/fuzz/fuzz_$name.cpp ${sources[$name]} -newer "$bin")" ]; then
    (cd "$repo" && "$cxx" "${flags[@]}" "tests/fuzz/fuzz_$name.cpp" ${sources[$name]} -lcrypto -lpcre2-8 -o "$bin") ||
      { echo "fuzz_$name: does not build"; failed=1; continue; }
  fi
  corpus=$out/corpus_$name
  rm -rf "$corpus" && mkdir -p "$corpus" && cp "$repo/tests/data/fuzz-corpus/$name/"* "$corpus/" 2>/dev/null
  if (cd "$out" && "$bin" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
        "$corpus" >"$out/fuzz_$name.log" 2>&1); then
    echo "fuzz_$name: $(grep -Eo 'Done [0-9]+ runs in [0-9]+ second' "$out/fuzz_$name.log" | tail -1)s, no crash (ASan, UBSan)"
  else
    echo "fuzz_$name: FAILED"; grep -A30 "ERROR\|runtime error" "$out/fuzz_$name.log" | head -40; failed=1
  fi
done
exit $failed
