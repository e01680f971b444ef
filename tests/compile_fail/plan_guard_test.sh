#!/usr/bin/env bash
# Proves an executor's plan guard (engine/layer_plan.hpp, runs_every_entry):
# the executor's source compiles as it is, and fails with the guard's
# message once LayerPlan, or ForwardPlan, has one more entry: a bool where
# padding hides it from sizeof (after LayerPlan::post_norms, after
# ForwardPlan::final_softcap). The extra entry goes into a copy of the
# header, found first on the include path; the source tree is not touched.
#
#   plan_guard_test.sh CXX REPO cpu|cuda
#
# The CUDA executor is compiled the SIMT emulator's way
# (kernels/cuda/emulator/run.sh): g++ alone, no nvcc, no GPU. Syntax only.
set -euo pipefail
cxx=$1
repo=$2
executor=$3
case $executor in
  cpu)
    source=engine/forward.cpp
    flags=()
    who="CPU executor"
    ;;
  cuda)
    source=engine/cuda_forward.cpp
    flags=(-DKVG_HAVE_CUDA=1 -DKVG_CUDA_EMULATOR=1 -I"$repo/kernels/cuda/emulator/include")
    who="CUDA executor"
    ;;
  *)
    echo "plan_guard_test.sh: executor '$executor' is not cpu or cuda" >&2
    exit 2
    ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/probe/engine"

# compile [INCLUDE_FIRST]: the executor's source, syntax only; its messages in $work/log.
compile() {
  "$cxx" -std=c++20 -fsyntax-only "${flags[@]}" "$@" -I"$repo" "$repo/$source" >"$work/log" 2>&1
}

if ! compile; then
  cat "$work/log"
  echo "FAIL: $source does not compile as it is, so the failures below would prove nothing" >&2
  exit 1
fi
echo "ok: $source compiles as it is"

# expect_refused PLAN ANCHOR: one more bool entry in PLAN, on the line after
# the one matching ANCHOR, must stop the build with the guard's message.
expect_refused() {
  local plan=$1 anchor=$2
  sed "/$anchor/a\\  bool probe_extra_entry = false;" "$repo/engine/layer_plan.hpp" >"$work/probe/engine/layer_plan.hpp"
  if [ "$(diff "$repo/engine/layer_plan.hpp" "$work/probe/engine/layer_plan.hpp" | grep -c '^>')" != 1 ]; then
    echo "FAIL: '$anchor' is not one line of engine/layer_plan.hpp: point this test at $plan's new members" >&2
    exit 1
  fi
  if compile -I"$work/probe"; then
    echo "FAIL: $source compiles with an extra $plan entry: its guard did not stop the build" >&2
    exit 1
  fi
  if ! grep -qF "a new $plan entry (engine/layer_plan.hpp): run it in the $who" "$work/log"; then
    cat "$work/log"
    echo "FAIL: $source with an extra $plan entry failed, but not with its guard's message" >&2
    exit 1
  fi
  echo "ok: an extra $plan entry stops $source with the guard's message"
}

expect_refused LayerPlan '^ *bool post_norms = '
expect_refused ForwardPlan '^ *float final_softcap = '
