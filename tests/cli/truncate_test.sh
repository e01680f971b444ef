#!/usr/bin/env bash
# A model file truncated in place while `kvg bench` decodes from it (the
# weights are memory-mapped; engine/gguf/mapping_guard.hpp): the command must
# stop with a clear error naming the file and exit status 3 (an i/o error,
# cli/main.cpp), not die of SIGBUS (exit status 135). Once with one thread, once with two
# (the worker threads read the weights too). Usage: truncate_test.sh KVG
set -u
kvg=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model=$tmp/model.gguf
passed=0
failed=0

for threads in 1 2; do
  # 4 layers of 256 wide: about 13 MB of f32 weights, a few ms per token, so
  # 20000 decode steps outlast the test by far.
  "$kvg" synth --n-embd 256 --n-layer 4 --n-head 4 --vocab 512 --n-ctx 32768 --out "$model" >/dev/null || exit 1
  size=$(stat -c %s "$model")
  "$kvg" bench --model "$model" --prompt-tokens 8 --gen-tokens 20000 --threads $threads --skip-memory \
    >"$tmp/out" 2>"$tmp/err" &
  pid=$!
  # Truncate once the file is mapped and decoding has begun.
  for _ in $(seq 1 200); do
    if grep -q "$model" /proc/$pid/maps 2>/dev/null; then break; fi
    sleep 0.05
  done
  sleep 1
  truncate -s 4096 "$model"
  wait $pid
  status=$?
  message=$(tr '\r' '\n' <"$tmp/err" | grep -v '^bench:' | tail -1)
  echo "threads $threads: model of $size bytes truncated to 4096 during kvg bench: exit status $status: $message"
  if [ "$status" = 3 ] && grep -q "model file '$model' was truncated while in use" "$tmp/err"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: expected exit status 3 and the truncation named (135 is death by SIGBUS)"
    sed 's/^/  | /' "$tmp/out" "$tmp/err" | tail -5
  fi
done
echo "truncate_test: $passed passed, $failed failed"
[ "$failed" = 0 ]
