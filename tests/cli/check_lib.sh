# Sourced by the `kvg` end-to-end scripts (tests/cli/*_test.sh): a counted
# check, and the rule for a missing model. Needs $tmp (a scratch directory).
passed=0
failed=0
check() {  # check NAME COMMAND...: passes when COMMAND exits 0
  local name=$1
  shift
  if "$@" >"$tmp/out" 2>"$tmp/err"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: $name"
    sed 's/^/  | /' "$tmp/out" "$tmp/err" | head -20
  fi
}
fails() { ! "$@"; }

# need_files FILE...: exits 77 (ctest: skipped) when one is missing, or 1
# under CI=true, where a missing file is a failure.
need_files() {
  for f in "$@"; do
    [ -f "$f" ] && continue
    if [ "${CI:-}" = true ] || [ "${CI:-}" = 1 ]; then
      echo "FAIL: $f not found (CI=true: a missing model fails)"
      exit 1
    fi
    echo "skipped: $f not found (set KVG_TEST_DATA)"
    exit 77
  done
}

# finish SUITE: the counts, and the exit status.
finish() {
  echo "$1: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
