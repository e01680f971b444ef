#!/usr/bin/env bash
# The GPU check (issues #6, #16): what the SIMT emulator cannot prove, proved
# on one NVIDIA GPU in under 8 minutes (budgeted for one H200, 16 cores). It
# needs nvcc, cmake, g++, OpenSSL, PCRE2 and GoogleTest, no network; the
# PostgreSQL stage also needs a PostgreSQL server installation (pg_config).
# A machine with none of them (but the NVIDIA driver): scripts/gpu-bundle.sh.
#
#   1. build (build-gpu/, -DKVG_CUDA=ON): kvg_test_cuda, the kvg CLI and the
#      libraries the extension links;
#   2. every CUDA test: each kernel against its CPU definition for every
#      weight type, whole models and synthetic models of every type (logits
#      SHA-256 equal to the CPU's for every chunking), grafts across devices,
#      resident weights (20 sessions, one upload), CUDA failures;
#   3. CPU == GPU logits for every architecture `kvg synth` writes and every
#      weight type (the CLI, `kvg logits --device cpu|cuda`), under
#      f32-portable-v1, and under q8-portable-v1 for every block-quantized
#      type (kernels/cuda/matmul_q8: integer activations);
#   4. the PostgreSQL path: the extension built with CUDA in a private
#      cluster; one backend makes 20 calls on the GPU (the weights must go up
#      once: kvg_model_info()->>'gpu_weight_uploads'), then another backend
#      (a fresh fork of the postmaster) does the same; both must give the
#      CPU's text; then 8 and 32 sessions at once through the engine worker
#      (kvg.engine = worker: one upload in all, every text the CPU's);
#   5. speed on a ~1B-parameter q8_0 synthetic model: CPU versus GPU prefill
#      and decode, graft versus recompute (exact), GPU decode tokens/s at 1K,
#      8K and 32K tokens of context, and GPU prefill and decode tokens/s per
#      recipe (`kvg bench --device cuda --recipe R`, one run each);
#   6. one table of all of it, for the issue's closing note.
#
# Without a usable GPU it says so and exits 2 before building anything.
# Environment: KVG_TEST_DATA (test models, default tests/data), KVG_GPU_BUILD
# (build directory, default build-gpu), JOBS (default nproc), KVG_PGPORT
# (default 55432), KVG_BENCH_CONTEXTS (default "1024 8192 32768"),
# KVG_GPU_CHECK_STAGES (default "build tests archs postgres bench").
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${KVG_GPU_BUILD:-$repo/build-gpu}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 4)}
export KVG_TEST_DATA=${KVG_TEST_DATA:-$repo/tests/data}
stages=" ${KVG_GPU_CHECK_STAGES:-build tests archs postgres bench} "
start=$SECONDS
stage() { echo; echo "== $* (at $((SECONDS - start)) s)"; }
wants() { [[ $stages == *" $1 "* ]]; }

# The table: one "check|result|verdict" line per row (verdict: pass, FAIL,
# or not run), printed at the end whatever happened in between.
results=$(mktemp)
trap 'rm -f "$results"' EXIT
row() { printf '%s|%s|%s\n' "$1" "$2" "$3" >>"$results"; }
print_table() {
  echo
  echo "| check | result | verdict |"
  echo "|---|---|---|"
  while IFS='|' read -r check result verdict; do echo "| $check | $result | $verdict |"; done <"$results"
  echo
  echo "total time: $((SECONDS - start)) s"
}
finish() {
  print_table
  if grep -q '|FAIL$' "$results"; then echo "gpu-check: FAILED"; exit 1; fi
  echo "gpu-check: passed"
  exit 0
}

stage "GPU"
if ! command -v nvidia-smi >/dev/null || ! gpus=$(nvidia-smi -L 2>/dev/null) || [ -z "$gpus" ]; then
  echo "gpu-check: no NVIDIA GPU here (nvidia-smi is missing or lists no device)."
  echo "Nothing was checked: this script proves on a GPU what the SIMT emulator cannot (scripts/test.sh runs the emulator)."
  exit 2
fi
echo "$gpus"
row "GPU" "$(head -1 <<<"$gpus" | sed 's/ (UUID.*//')" "-"

if wants build; then
  stage "configure ($build, KVG_CUDA=ON) and build with -j$jobs"
  mkdir -p "$build"
  if ! cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVG_CUDA=ON >"$build/configure.log" 2>&1; then
    cat "$build/configure.log"
    row "build (KVG_CUDA=ON)" "configure failed" FAIL
    finish
  fi
  if ! timeout 360 cmake --build "$build" -j "$jobs" --target kvg_test_cuda kvg kvg_engine kvg_storage kvg_kernels; then
    row "build (KVG_CUDA=ON)" "failed" FAIL
    finish
  fi
  row "build (KVG_CUDA=ON)" "$((SECONDS - start)) s" pass
fi
cli=$build/cli/kvg

if wants tests; then
  stage "every CUDA test (kernels, models, grafts, residency, failures)"
  [ -d "$KVG_TEST_DATA/models" ] || echo "warning: no models under $KVG_TEST_DATA: the model tests will skip"
  log=$build/gpu-tests.log
  timeout 300 "$build/tests/kvg_test_cuda" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\..*/\1/p' "$log")
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\},.*/\1/p' "$log")
  if ! grep -q "cuda_device_available: yes" "$log"; then
    row "CUDA tests" "no usable GPU: $(grep -m1 'cuda_device_available' "$log")" FAIL
  elif [ "$status" -ne 0 ]; then
    row "CUDA tests (kernels x 13 weight types, models, grafts)" "exit $status: $(grep -c '^\[  FAILED  \] [A-Z]' "$log") failed" FAIL
  else
    row "CUDA tests (kernels x 13 weight types, models, grafts)" "${passed:-0} passed, ${skipped:-0} skipped" pass
  fi
  uploads=$(sed -n 's/^weight uploads across \([0-9]*\) sessions on one model in this process: \([0-9]*\)$/\2 upload(s) for \1 sessions/p' "$log")
  case "$uploads" in
    "1 upload(s) for "*) row "weights resident (20 sessions, one process)" "$uploads" pass ;;
    "") row "weights resident (20 sessions, one process)" "the test did not report" FAIL ;;
    *) row "weights resident (20 sessions, one process)" "$uploads" FAIL ;;
  esac
fi

if wants archs; then
  stage "CPU == GPU logits for every architecture and weight type (kvg logits)"
  # The architectures `kvg synth --arch` accepts, from its help ("llama|qwen2 ...").
  archs=$("$cli" synth --help 2>&1 | sed -n 's/.*--arch[^a-z]*\([a-z0-9_|-]*\).*/\1/p' | head -1 | tr '|' ' ')
  [ -n "$archs" ] || archs="llama"
  quantized="q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k"
  types="f32 f16 bf16 $quantized"
  dir=$build/gpu-check-models
  mkdir -p "$dir"
  tokens=$(seq -s, 3 70)  # 68 positions: three attention blocks, chunked below
  # The SHA-256 `kvg logits` prints for model $1 under recipe $2 on device $3
  # (empty, with the error in $1.$2.$3.err, when it fails).
  logits_hash() {
    local chunk=()
    [ "$3" = cuda ] && chunk=(--chunk 7)
    "$cli" logits --model "$1" --tokens "$tokens" --recipe "$2" --device "$3" "${chunk[@]}" --out /dev/null \
      2>"$1.$2.$3.err" | grep -oE '[0-9a-f]{64}' | tail -1
  }
  for arch in $archs; do
    same=() differ=() unwritable=() q8_same=() q8_differ=() q8_refused=()
    for type in $types; do
      m=$dir/$arch-$type.gguf
      if ! "$cli" synth --out "$m" --arch "$arch" --type "$type" --n-embd 256 --n-layer 2 --n-head 4 --n-head-kv 2 \
        --n-ff 512 --vocab 1024 --n-ctx 256 --seed 5 >/dev/null 2>"$m.err"; then
        unwritable+=("$type")
        continue
      fi
      cpu=$(logits_hash "$m" f32-portable-v1 cpu)
      gpu=$(logits_hash "$m" f32-portable-v1 cuda)
      if [ -n "$cpu" ] && [ "$cpu" = "$gpu" ]; then same+=("$type"); else differ+=("$type"); fi
      [[ " $quantized " == *" $type "* ]] || continue
      # q8-portable-v1: refused by name where a device does not compute it
      # (an architecture the GPU lacks is refused under both recipes).
      cpu=$(logits_hash "$m" q8-portable-v1 cpu)
      gpu=$(logits_hash "$m" q8-portable-v1 cuda)
      if [ -z "$cpu" ] && grep -q 'not implemented' "$m.q8-portable-v1.cpu.err"; then q8_refused+=("$type")
      elif [ -n "$cpu" ] && [ "$cpu" = "$gpu" ]; then q8_same+=("$type")
      else q8_differ+=("$type"); fi
    done
    result="${#same[@]} types equal"
    [ ${#differ[@]} -gt 0 ] && result+="; DIFFER: ${differ[*]}"
    [ ${#unwritable[@]} -gt 0 ] && result+="; synth cannot write: ${unwritable[*]}"
    if [ ${#differ[@]} -gt 0 ] || [ ${#same[@]} -eq 0 ]; then verdict=FAIL; else verdict=pass; fi
    row "CPU == GPU logits SHA-256, arch $arch" "$result" "$verdict"
    result="${#q8_same[@]} quantized types equal"
    [ ${#q8_differ[@]} -gt 0 ] && result+="; DIFFER: ${q8_differ[*]}"
    [ ${#q8_refused[@]} -gt 0 ] && result+="; the CPU does not compute q8-portable-v1 here: ${q8_refused[*]}"
    if [ ${#q8_differ[@]} -gt 0 ]; then verdict=FAIL
    elif [ ${#q8_same[@]} -eq 0 ]; then verdict="not run"
    else verdict=pass; fi
    row "CPU == GPU logits SHA-256 under q8-portable-v1, arch $arch" "$result" "$verdict"
  done
fi

if wants postgres; then
  stage "PostgreSQL: one backend on the GPU for 20 calls, then another backend"
  if ! command -v pg_config >/dev/null || [ ! -x "$(pg_config --bindir)/initdb" ]; then
    row "PostgreSQL backends on the GPU" "PostgreSQL is not installed here" "not run"
  else
    export KVG_BUILD_DIR=${build#"$repo"/}  # Makefile.pgxs builds kvg.so in this CMake tree (with the CUDA kernels)
    if ! timeout 300 "$repo/scripts/pg-cluster.sh" start; then
      row "PostgreSQL backends on the GPU" "the cluster or the extension build failed" FAIL
    else
      # shellcheck source=scripts/pg-env.sh
      source "$repo/scripts/pg-env.sh"
      # shellcheck disable=SC2154 # pg_files: set by pg-env.sh
      model=$pg_files/models/stories260K.gguf  # staged there by pg-cluster.sh
      errors=$build/gpu-check-psql.err
      sql() {  # one backend (one psql connection) per call
        psql -X -q -At -d postgres -v ON_ERROR_STOP=1 -c "SET client_min_messages = warning" \
          -c "CREATE EXTENSION IF NOT EXISTS kvg" -c "SET kvg.model = '$model'" "$@" 2>>"$errors"
      }
      cpu_text=$(sql -c "SET kvg.device = 'cpu'" -c "SELECT kvg_generate('Once upon a time', 24)")
      # kvg.engine = backend: in the default worker mode the engine worker
      # makes every call and the backend never loads the model (its
      # gpu_weight_uploads stays 0, as the first H200 run showed).
      backend() {  # device, uploads after 20 calls, same text as the CPU
        sql -c "SET kvg.device = 'cuda'" -c "SET kvg.engine = backend" \
          -c "SELECT count(*) FROM (SELECT kvg_generate('Once upon a time', 24) AS t FROM generate_series(1, 20)) s" \
          -c "SELECT kvg_model_info()->>'device', kvg_model_info()->>'gpu_weight_uploads', pg_backend_pid()" \
          -c "SELECT kvg_generate('Once upon a time', 24)"
      }
      first=$(backend)
      second=$(backend)
      echo "cpu: $cpu_text"; echo "first backend:"; echo "$first"; echo "second backend:"; echo "$second"
      [ -s "$errors" ] && { echo "psql said:"; cat "$errors"; }
      for which in first second; do
        out=${!which}
        info=$(sed -n 2p <<<"$out")
        text=$(sed -n '3,$p' <<<"$out")
        if [ "$(cut -d'|' -f1,2 <<<"$info")" = "cuda|1" ] && [ "$text" = "$cpu_text" ] && [ -n "$cpu_text" ]; then
          row "PostgreSQL, $which backend: 21 calls on the GPU" "device cuda, 1 weight upload, text == CPU (pid $(cut -d'|' -f3 <<<"$info"))" pass
        else
          row "PostgreSQL, $which backend: 21 calls on the GPU" "$(tr '\n' ' ' <<<"$info") $(head -c 200 <<<"$out" | tr '\n' ' ')" FAIL
        fi
      done
      # The engine worker: 8 and 32 sessions at once, every generation in the
      # one worker on the GPU (one context, one weight upload), each the CPU's text.
      for clients in 8 32; do
        began=$(date +%s.%N)
        for i in $(seq 1 "$clients"); do
          sql -c "SET kvg.device = 'cuda'" -c "SET kvg.engine = worker" \
            -c "SELECT kvg_generate('Once upon a time', 24)" >"$build/gpu-check-worker.$i" &
        done
        wait
        seconds=$(awk "BEGIN { print $(date +%s.%N) - $began }")
        same=0
        for i in $(seq 1 "$clients"); do [ "$(cat "$build/gpu-check-worker.$i")" = "$cpu_text" ] && same=$((same + 1)); done
        worker=$(psql -X -At -d postgres -c "SELECT gpu_weight_uploads || '|' || batch_peak FROM kvg_engine_worker()")
        result="$same of $clients == CPU text; worker weight uploads ${worker%%|*}; $(awk "BEGIN { printf \"%.0f\", 24 * $clients / $seconds }") tok/s in all (calls included)"
        if [ "$same" = "$clients" ] && [ "${worker%%|*}" = 1 ] && [ -n "$cpu_text" ]; then verdict=pass; else verdict=FAIL; fi
        row "PostgreSQL, engine worker: $clients sessions at once on the GPU" "$result" "$verdict"
      done
      "$repo/scripts/pg-cluster.sh" stop >/dev/null
    fi
  fi
fi

if wants bench; then
  stage "benchmark model: kvg synth, ~1B parameters, q8_0, 33K context"
  model=$build/synth-1b-q8_0-33k.gguf
  if [ ! -f "$model" ]; then
    timeout 300 "$cli" synth --out "$model" --n-embd 2048 --n-layer 16 --n-head 32 --n-head-kv 8 \
      --n-ff 8192 --vocab 32000 --type q8_0 --n-ctx 33024 --seed 1 || row "benchmark model" "kvg synth failed" FAIL
  fi
  if [ -f "$model" ]; then
    stage "benchmark: CPU versus GPU, graft versus recompute (1024-token prompt)"
    log=$build/gpu-bench.log
    KVG_BENCH_MODEL=$model KVG_BENCH_PROMPT=1024 timeout 240 "$build/tests/kvg_test_cuda" \
      --gtest_also_run_disabled_tests --gtest_filter='CudaBench.DISABLED_CpuVersusGpu' 2>&1 | tee "$log"
    bench_status=${PIPESTATUS[0]}
    pick() { grep -F "| $1" "$log" | head -1 | awk -F'|' '{ gsub(/ +/, " "); print "CPU" $3 "/ GPU" $4 }'; }
    verdict=pass
    [ "$bench_status" -eq 0 ] || verdict=FAIL
    row "prefill 1024 tokens, tokens/s" "$(pick prefill)" "$verdict"
    row "decode, tokens/s (short context)" "$(pick decode)" "$verdict"
    row "recompute 1024 tokens, s" "$(pick recompute)" "$verdict"
    row "graft 992 + evaluate 32, s" "$(pick graft)" "$verdict"
    row "graft logits == recompute logits" "$(pick 'graft logits')" "$verdict"
    row "last-token logits, GPU == CPU" "$(grep -F '| last-token' "$log" | awk -F'|' '{ gsub(/ /, ""); print $3 }')" "$verdict"

    stage "benchmark: GPU decode at long contexts"
    log=$build/gpu-context.log
    KVG_BENCH_MODEL=$model KVG_BENCH_CONTEXTS=${KVG_BENCH_CONTEXTS:-1024 8192 32768} timeout 240 \
      "$build/tests/kvg_test_cuda" --gtest_also_run_disabled_tests \
      --gtest_filter='CudaBench.DISABLED_DecodeAtLongContext' 2>&1 | tee "$log"
    context_status=${PIPESTATUS[0]}
    while read -r context prefill decode; do
      row "GPU at context $context: decode tokens/s (prefill tokens/s)" "$decode ($prefill)" \
        "$([ "$context_status" -eq 0 ] && echo pass || echo FAIL)"
    done < <(sed -n 's/^bench decode_context=\([0-9]*\) prefill_tok_s=\([0-9.]*\) decode_tok_s=\([0-9.]*\)$/\1 \2 \3/p' "$log")
    grep -q '^bench decode_context=' "$log" || row "GPU decode at long contexts" "did not report (exit $context_status)" FAIL

    stage "benchmark: GPU prefill and decode per recipe (kvg bench --device cuda)"
    # One run per recipe, so that a recipe the engine refuses costs only its row.
    for recipe in f32-portable-v1 q8-portable-v1; do
      log=$build/gpu-bench-$recipe.log
      timeout 120 "$cli" bench --model "$model" --device cuda --recipe "$recipe" --prompt-tokens 512 --gen-tokens 64 \
        --max-context 1024 --skip-memory -r 1 --json >"$log" 2>"$log.err"
      bench_status=$?
      speeds=$(python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["recipes"][0]
print(r["decode"]["tokens_per_s"], r["prefill"]["tokens_per_s"])' "$log" 2>/dev/null)
      if [ "$bench_status" -eq 0 ] && [ -n "$speeds" ]; then
        row "GPU $recipe: decode tokens/s (prefill 512 tokens/s)" "$(cut -d' ' -f1 <<<"$speeds") ($(cut -d' ' -f2 <<<"$speeds"))" pass
      elif grep -q 'not implemented' "$log.err"; then
        row "GPU $recipe: decode tokens/s (prefill 512 tokens/s)" "refused: $(grep -m1 'not implemented' "$log.err" | head -c 160)" "not run"
      else
        row "GPU $recipe: decode tokens/s (prefill 512 tokens/s)" "exit $bench_status: $(head -c 200 "$log.err" | tr '\n' ' ')" FAIL
      fi
    done
  fi
fi

stage "done"
finish
