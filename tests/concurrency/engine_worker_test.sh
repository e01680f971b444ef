#!/usr/bin/env bash
# The engine worker (extension/src/workers/engine/engine_worker.hpp) from SQL, many sessions
# at once, against the cluster scripts/pg-env.sh names (PGHOST/PGPORT set by
# the caller). TAP lines: "ok N - ..." / "not ok N - ...".
#
#  1. interleavings: rounds of concurrent kvg_generate_bytes calls (random
#     prompts, lengths, sampling, some after an artifact) released at the same
#     instant in worker mode; each output is compared, byte for byte, with the
#     same call run alone in backend mode; the worker's passes carried more
#     than one sequence;
#     Again with kvg.engine_pass_tokens = 5 (2 rounds): prompts prefilled in
#     pieces shared out among the calls, the same bytes;
#  2. admission: kvg.engine_max_batch = 1 queues the rest (same bytes), and a
#     generation whose KV cannot fit kvg.engine_kv_memory is refused (53200)
#     by its backend, before it is queued (the worker never sees it), as is a
#     set-based call with one such question;
#  3. roles: with 8-token passes and 6 crowd prompts prefilling, alice's
#     short call takes about her prompt at half a pass (her role's share),
#     counted in the worker's passes; with room for one sequence, her call
#     is admitted before a crowd call that came earlier (her role has none
#     running);
#  4. cancellation under batching: a statement_timeout and a pg_cancel_backend
#     end two calls inside busy passes, the others finish with their bytes,
#     and the worker drops the cancelled sequences;
#  5. a slow client: a backend stopped (SIGSTOP) in the middle of its
#     generation stalls nobody, and finishes with its bytes when continued;
#  6. a crowded slow client: with kvg.engine_max_batch = 1 the stopped
#     client's sequence gives its place and KV up after 5 s of not reading:
#     the other call is served, and the stopped one gets 53000 when continued;
#  7. kvg_answer from concurrent sessions (recurring, transfer, cold) gives
#     the same answers and stores the same chain links (captured by the
#     worker) as in backend mode;
#  8. a recurring answer from a backend that never read its entry grafts from
#     the worker's verified-artifact cache (hits up, no miss);
#  9. a model's fingerprint is hashed once per file for the whole server
#     (extension/src/model/model_fingerprints.hpp): a new backend takes it from the
#     table, a copy of the file is hashed again, to the same value;
# 10. model files under load: 4 sessions calling in worker mode while the
#     file at their kvg.model is replaced 40 times by mv (two models in
#     turn): no call fails (the worker keeps the file each backend mapped);
#     then it is cut short in place: the calls that fail say 22023 or 58030,
#     as in backend mode, never XX001; and a call queued while the worker
#     is stopped, whose backend's model (a file the worker never saw) is
#     renamed over before the worker claims it: the worker computes with the
#     backend's file (opened through the backend's descriptor), the bytes of
#     backend mode with that model, and a new call gets the new file;
# 11. flat memory: 20,000 calls after a warm-up grow the worker's anonymous
#     memory by at most 1 MB (each call's queue handles are freed);
# 12. a stopped worker (SIGSTOP): a call that waits for it fails with 57V02
#     once its heartbeat is 10 s old (well under 20 s), and when it is
#     continued the next call runs;
# 13. the worker terminated under load (SIGTERM: an error exit): the calls it
#     held fail with 57V02, the postmaster restarts it, the same sessions'
#     next calls succeed;
# 14. the worker SIGKILLed under load: PostgreSQL resets shared memory (its
#     rule for any process that dies without cleaning up), the calls in
#     flight fail, the server and the worker come back, the next call gives
#     the same bytes, and the audit chain verifies.
# The long calls (3, 4, 5, 6, 13, 14) run on a synthetic model slow enough (~100 tokens/s
# here) for a signal to land in the middle of them.
# Usage: engine_worker_test.sh DATABASE MODEL KVG (the server's copy of
# TinyStories-656K, and the kvg command that writes the slow model)
set -uo pipefail
db=$1
model=$2
kvg=$3
dir=$(mktemp -d /tmp/kvg-engine-worker.XXXXXX)
chmod 755 "$dir"
slow=$dir/slow.gguf
"$kvg" synth --out "$slow" --seed 3 --n-embd 768 --n-layer 6 --n-head 12 --vocab 512 --n-ctx 1024 >/dev/null &&
  chmod 644 "$slow" || { echo "not ok 1 - the slow synthetic model could not be written"; exit 1; }
trap 'kill -CONT $(cat "$dir"/stopped 2>/dev/null) 2>/dev/null; rm -rf "$dir"' EXIT
n=0
failures=0
check() {  # check DESCRIPTION COMMAND...
  n=$((n + 1))
  if "${@:2}"; then echo "ok $n - $1"; else echo "not ok $n - $1"; failures=$((failures + 1)); fi
}
sql() {  # sql MODE SQL [MODEL]: one value, as text
  PGOPTIONS="-c kvg.model=${3:-$model} -c kvg.device=cpu -c kvg.engine=$1" \
    psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" -c "$2"
}
worker_field() { psql -X -At -d "$db" -c "SELECT $1 FROM kvg_engine_worker()"; }
# wait_running N: until the worker runs at least N sequences (at most 10 s).
wait_running() {
  for _ in $(seq 1 200); do
    [ "$(worker_field sequences)" -ge "$1" ] 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}

# The calls of one round: prompt text, max_tokens, seed, temperature, and
# whether it continues the shared artifact.
prompts=("Once upon a time" "The little dog" "Tom and Sue went to the park. They" "One day a bird"
  "The sun was hot and" "Lily had a red ball." "A big boat sailed" "Mom said")
artifact=$(sql backend "SELECT kvg_capture('Once upon a time there was a girl named Lily. She had a cat.')") ||
  { echo "not ok 1 - the shared artifact could not be captured"; exit 1; }
call_sql() {  # call_sql I: the call, as SQL returning hex
  local i=$1 p=${prompts[$((RANDOM % ${#prompts[@]}))]} tokens=$((1 + RANDOM % 48)) seed=$RANDOM
  local temperature=$([ $((RANDOM % 2)) = 0 ] && echo 0 || echo 0.9) after=null
  [ $((RANDOM % 3)) = 0 ] && after="'$artifact'"
  echo "SELECT encode(kvg_generate_bytes(' $p #$i', $tokens, $after, $seed, $temperature), 'hex')"
}

interleavings() {  # interleavings [ROUNDS]
  local round i ok=0 total=0 start
  for round in $(seq 1 "${1:-4}"); do
    start=$(psql -X -At -d "$db" -c "SELECT (clock_timestamp() + interval '1.5 s')::text")
    for i in $(seq 1 8); do
      call_sql "$round.$i" >"$dir/call.$i"
      ( sql worker "SELECT pg_sleep_until('$start')" >/dev/null; sql worker "$(cat "$dir/call.$i")" >"$dir/worker.$i" 2>&1 ) &
    done
    wait
    for i in $(seq 1 8); do
      total=$((total + 1))
      sql backend "$(cat "$dir/call.$i")" >"$dir/backend.$i" 2>&1
      if [ -s "$dir/worker.$i" ] && cmp -s "$dir/worker.$i" "$dir/backend.$i"; then ok=$((ok + 1)); else
        echo "# differs: $(cat "$dir/call.$i")"; echo "#   worker:  $(head -c 300 "$dir/worker.$i")"
        echo "#   backend: $(head -c 300 "$dir/backend.$i")"
      fi
    done
  done
  echo "# $ok of $total concurrent worker calls equal their solitary backend runs; batch peak $(worker_field batch_peak)"
  [ "$ok" = "$total" ] && [ "$(worker_field batch_peak)" -gt 1 ]
}
check "32 concurrent calls in the worker, released together, equal each call alone in its backend" interleavings

# The same with passes of 5 tokens: prompts are prefilled in pieces shared
# out among the calls, and decode rows go first.
small_passes() {
  local ok
  psql -X -q -d "$db" -c "ALTER SYSTEM SET kvg.engine_pass_tokens = 5" -c "SELECT pg_reload_conf()" >/dev/null
  sleep 1
  interleavings 2
  ok=$?
  psql -X -q -d "$db" -c "ALTER SYSTEM RESET kvg.engine_pass_tokens" -c "SELECT pg_reload_conf()" >/dev/null
  sleep 1
  return $ok
}
check "with kvg.engine_pass_tokens = 5, 16 concurrent calls equal each call alone in its backend" small_passes

admission() {
  local i ok=0
  psql -X -q -d "$db" -c "ALTER SYSTEM SET kvg.engine_max_batch = 1" -c "SELECT pg_reload_conf()" >/dev/null
  sleep 1
  for i in 1 2 3 4; do call_sql "a$i" >"$dir/call.$i"; ( sql worker "$(cat "$dir/call.$i")" >"$dir/worker.$i" 2>&1 ) & done
  wait
  for i in 1 2 3 4; do
    sql backend "$(cat "$dir/call.$i")" >"$dir/backend.$i" 2>&1
    cmp -s "$dir/worker.$i" "$dir/backend.$i" && ok=$((ok + 1))
  done
  psql -X -q -d "$db" -c "ALTER SYSTEM SET kvg.engine_kv_memory = '1MB'" -c "ALTER SYSTEM RESET kvg.engine_max_batch" \
    -c "SELECT pg_reload_conf()" >/dev/null
  sleep 1
  local refused seen_before seen_after
  seen_before=$(worker_field "served + failed")
  refused=$(PGOPTIONS="-c kvg.model=$slow -c kvg.engine=worker" psql -X -q -At -d "$db" -v VERBOSITY=verbose \
    -c "SELECT kvg_generate(repeat('the cat sat on the mat. ', 40), 200)" \
    -c "SELECT * FROM kvg_answers(ARRAY['the cat', repeat('the cat sat on the mat. ', 40)], 200)" 2>&1)
  sleep 0.2  # the worker publishes its figures at the end of its round
  seen_after=$(worker_field "served + failed")
  psql -X -q -d "$db" -c "ALTER SYSTEM RESET kvg.engine_kv_memory" -c "SELECT pg_reload_conf()" >/dev/null
  sleep 1
  echo "# engine_max_batch = 1: $ok of 4 equal; 1MB of KV: $(echo "$refused" | head -1);" \
    "calls the worker saw: $seen_before before, $seen_after after"
  [ "$ok" = 4 ] && [ "$(echo "$refused" | grep -c "53200")" = 2 ] && echo "$refused" | grep -q "kvg.engine_kv_memory" &&
    [ "$seen_before" = "$seen_after" ]
}
check "kvg.engine_max_batch queues calls (same bytes); a generation, or a set-based call, beyond kvg.engine_kv_memory is refused (53200) before it is queued" admission

# Two roles: a crowd of long prompts, and alice's short calls.
for role in kvg_ew_crowd kvg_ew_alice; do
  psql -X -q -d "$db" -c "DROP ROLE IF EXISTS $role" -c "CREATE ROLE $role LOGIN IN ROLE kvg_user, pg_read_all_stats" \
    -c "ALTER ROLE $role SET kvg.model = '$slow'" -c "ALTER ROLE $role SET kvg.device = 'cpu'" >/dev/null 2>&1
done
as_role() {  # as_role ROLE SQL: run as that role in worker mode
  psql -X -q -At -U "$1" -d "$db" -c "$2"
}
# Long enough that no crowd prompt is through its prefill (and decoding, first
# in every pass) before alice's call comes, even on a loaded machine.
crowd_call="SELECT length(kvg_generate(pg_backend_pid() || repeat(' the cat sat on the mat.', 60), 8))"
# wait_claimed N: until the worker holds N calls, running or waiting for
# room (kvg.progress shows a call waiting for room as queued, as one not yet
# taken; the worker's own figures tell them apart) (at most 20 s).
wait_claimed() {
  for _ in $(seq 1 400); do
    [ "$(worker_field "sequences + queued")" -ge "$1" ] 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}
roles_share() {
  local i pids passes tokens bound order
  # Passes of 8 tokens: while 6 crowd sessions prefill, alice's prompt gets
  # half of each pass (her role's share), not a seventh, and not the rest
  # after every crowd prompt.
  psql -X -q -d "$db" -c "ALTER SYSTEM SET kvg.engine_pass_tokens = 8" -c "SELECT pg_reload_conf()" >/dev/null
  sleep 1.2
  pids=()
  for i in 1 2 3 4 5 6; do ( as_role kvg_ew_crowd "$crowd_call" >/dev/null 2>&1 ) & pids+=($!); done
  wait_claimed 6 || return 1
  # In one session of hers: the model mapped and the prompt tokenized
  # before the worker's pass count is read, so only her call's passes count.
  read -r tokens passes < <(psql -X -q -At -U kvg_ew_alice -d "$db" -v ON_ERROR_STOP=1 <<'SQL'
SELECT cardinality(kvg_tokenize('Alice asks about the little red hen and her friends in the barn.')) AS tokens \gset
SELECT passes AS before FROM kvg_engine_worker() \gset
SELECT kvg_generate('Alice asks about the little red hen and her friends in the barn.', 4) \g /dev/null
SELECT :tokens || ' ' || (passes - :before) FROM kvg_engine_worker();
SQL
  )
  bound=$(( (tokens + 3) / 4 + 8 ))  # her prompt at 4 tokens a pass, 3 decode passes, slack
  psql -X -q -d "$db" -c "SELECT pg_cancel_backend(a.pid) FROM pg_stat_activity a WHERE a.usename = 'kvg_ew_crowd'" \
    -c "ALTER SYSTEM RESET kvg.engine_pass_tokens" -c "SELECT pg_reload_conf()" >/dev/null
  wait "${pids[@]}" 2>/dev/null
  [ -n "$passes" ] || return 1
  echo "# 8-token passes, 6 crowd prompts prefilling: alice's $tokens-token prompt and 4 tokens took" \
    "$passes passes (at most $bound with half of each pass; a seventh would take about $((tokens * 7 / 8)))"
  [ "$passes" -le "$bound" ] || return 1
  # Room for one sequence: a crowd call runs, another waits, then alice's
  # comes; her role has none running, so hers goes first.
  psql -X -q -d "$db" -c "ALTER SYSTEM SET kvg.engine_max_batch = 1" -c "SELECT pg_reload_conf()" >/dev/null
  sleep 1.2
  : >"$dir/order"
  ( as_role kvg_ew_crowd "$crowd_call" >/dev/null 2>&1; echo crowd1 >>"$dir/order" ) &
  local claimed=0
  if wait_claimed 1; then
    ( as_role kvg_ew_crowd "$crowd_call" >/dev/null 2>&1; echo crowd2 >>"$dir/order" ) &
    wait_claimed 2 && claimed=1
    ( as_role kvg_ew_alice "SELECT kvg_generate('Alice asks again.', 4)" >/dev/null 2>&1; echo alice >>"$dir/order" ) &
  fi
  wait
  # Put back whatever happened: the checks after this one run with the default batch.
  psql -X -q -d "$db" -c "ALTER SYSTEM RESET kvg.engine_max_batch" -c "SELECT pg_reload_conf()" >/dev/null
  sleep 1.2
  [ "$claimed" = 1 ] || return 1
  order=$(tr '\n' ' ' <"$dir/order")
  echo "# kvg.engine_max_batch = 1: calls ended in the order $order"
  [ "$order" = "crowd1 alice crowd2 " ]
}
check "the worker is shared by role: alice's prompt gets her role's half of each pass, and her call is admitted before another crowd call" \
  roles_share

long_call="SELECT encode(kvg_generate_bytes(repeat('Once upon a time there was a big dog. ', 8), 200), 'hex')"
cancellation() {
  local i ok=0 timed cancelled pid
  sql backend "$long_call" "$slow" >"$dir/expected"
  for i in 1 2 3; do ( sql worker "$long_call" "$slow" >"$dir/worker.$i" 2>&1 ) & done
  ( PGOPTIONS="-c kvg.model=$slow -c kvg.engine=worker -c statement_timeout=300" \
      psql -X -q -At -d "$db" -c "$long_call" >"$dir/timed" 2>&1 ) &
  ( PGAPPNAME=kvg_cancel_me PGOPTIONS="-c kvg.model=$slow -c kvg.engine=worker" \
      psql -X -q -At -d "$db" -c "$long_call" >"$dir/cancelled" 2>&1 ) &
  wait_running 4
  # Its statement under way (a cancel that reaches a backend still starting up is lost).
  for _ in $(seq 1 200); do
    [ "$(psql -X -At -d "$db" -c "SELECT count(*) FROM kvg.progress p JOIN pg_stat_activity a USING (pid)
                                   WHERE a.application_name = 'kvg_cancel_me'")" = 1 ] && break
    sleep 0.05
  done
  psql -X -q -At -d "$db" -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'kvg_cancel_me'" >/dev/null
  wait
  for i in 1 2 3; do cmp -s "$dir/worker.$i" "$dir/expected" && ok=$((ok + 1)); done
  timed=$(grep -c "statement timeout" "$dir/timed")
  cancelled=$(grep -c "canceling statement due to user request" "$dir/cancelled")
  sleep 0.5
  echo "# $ok of 3 finished with their bytes; timeout: $(head -1 "$dir/timed"); cancel: $(head -1 "$dir/cancelled");" \
    "sequences left: $(worker_field sequences)"
  [ "$ok" = 3 ] && [ "$timed" = 1 ] && [ "$cancelled" = 1 ] && [ "$(worker_field sequences)" = 0 ]
}
check "a statement_timeout and a cancel end their calls inside shared passes; the others finish with their bytes" cancellation

# stop_a_client: a long call in worker mode whose backend is then stopped
# (SIGSTOP) until its queue is full; its output goes to $dir/stopped_out,
# its backend's pid to $dir/stopped, its psql's to $client. Then another
# session's long call runs to its end (its output: $dir/other), and the
# stopped backend is continued; held: the worker's running sequences while
# it was stopped.
stop_a_client() {
  local pid
  ( PGAPPNAME=kvg_stop_me PGOPTIONS="-c kvg.model=$slow -c kvg.engine=worker" \
      psql -X -q -At -d "$db" -v VERBOSITY=verbose -c "$long_call" >"$dir/stopped_out" 2>&1 ) &
  client=$!
  for _ in $(seq 1 50); do
    pid=$(psql -X -At -d "$db" -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'kvg_stop_me'")
    [ -n "$pid" ] && break
    sleep 0.1
  done
  sleep 0.3
  kill -STOP "$pid" && echo "$pid" >"$dir/stopped"
  sleep 1  # its queue fills (64 tokens) and the worker holds its sequence back
  held=$(worker_field sequences)
  timeout 120 bash -c "PGOPTIONS='-c kvg.model=$slow -c kvg.engine=worker' psql -X -q -At -d '$db' -c \"$long_call\"" \
    >"$dir/other" 2>&1
  kill -CONT "$pid" && rm -f "$dir/stopped"
  wait "$client"
}

slow_client() {
  local other_ok
  stop_a_client
  cmp -s "$dir/other" "$dir/expected" && other_ok=1 || other_ok=0
  echo "# while one backend was stopped: sequences $held, the other call equal: $other_ok;" \
    "the stopped one equal when continued: $(cmp -s "$dir/stopped_out" "$dir/expected" && echo 1 || echo 0)"
  [ "$held" -ge 1 ] && [ "$other_ok" = 1 ] && cmp -s "$dir/stopped_out" "$dir/expected"
}
check "a stopped client holds back only its own sequence; continued, it gets its bytes" slow_client

# With room for one sequence, the stopped client's would hold every other
# call back: after 5 s of not reading it gives its place up.
crowded_stopped_client() {
  local other_ok
  psql -X -q -d "$db" -c "ALTER SYSTEM SET kvg.engine_max_batch = 1" -c "SELECT pg_reload_conf()" >/dev/null
  sleep 1
  stop_a_client
  psql -X -q -d "$db" -c "ALTER SYSTEM RESET kvg.engine_max_batch" -c "SELECT pg_reload_conf()" >/dev/null
  sleep 1
  cmp -s "$dir/other" "$dir/expected" && other_ok=1 || other_ok=0
  echo "# kvg.engine_max_batch = 1, one backend stopped: the other call equal: $other_ok;" \
    "the stopped one when continued: $(grep -m1 ERROR "$dir/stopped_out")"
  [ "$other_ok" = 1 ] && grep -q "ERROR:  53000: kvg: this call did not read its replies" "$dir/stopped_out"
}
check "with kvg.engine_max_batch = 1 a stopped client gives its place up after 5 s: the others are served; it gets 53000" \
  crowded_stopped_client

# answers DB MODE: the library's questions asked by 4 sessions at once (each
# recurring, transfer and cold), then every answer and the stored artifacts.
answers() {
  local adb=$1 mode=$2 i
  for i in 1 2 3 4; do
    ( PGOPTIONS="-c kvg.model=$model -c kvg.engine=$mode" psql -X -q -At -d "$adb" -v ON_ERROR_STOP=1 \
        -c "SELECT answer || '|' || mode || '|' || coalesce(verified::text, '-') FROM kvg_answer_detail('What colour is box $i?', 8)" \
        -c "SELECT answer || '|' || mode FROM kvg_answer_detail('What colour is box $i today?', 8)" \
        -c "SELECT answer || '|' || mode FROM kvg_answer_detail('Where did the dog $i run?', 8)" >"$dir/answers.$mode.$i" 2>&1 ) &
  done
  wait
  cat "$dir"/answers."$mode".*
  psql -X -At -d "$adb" -c "SELECT sha256 FROM kvg.artifacts ORDER BY 1"
}
answers_in_worker() {
  local adb
  for adb in "${db}_w" "${db}_b"; do
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $adb" -c "CREATE DATABASE $adb" >/dev/null &&
      psql -X -q -d "$adb" -c "CREATE EXTENSION kvg" >/dev/null &&
      PGOPTIONS="-c kvg.model=$model" psql -X -q -At -d "$adb" -v ON_ERROR_STOP=1 -c \
        "SELECT count(kvg_learn('What colour is box ' || i || '?', 'contains', repeat('Box ' || i || ' is red. ', 30), 'red'))
         FROM generate_series(1, 4) i" >/dev/null || return 1
  done
  answers "${db}_w" worker >"$dir/all.worker"
  answers "${db}_b" backend >"$dir/all.backend"
  echo "# $(grep -c '|' "$dir/all.worker") answers, $(grep -vc '|' "$dir/all.worker") artifacts in worker mode;" \
    "the same in backend mode: $(cmp -s "$dir/all.worker" "$dir/all.backend" && echo yes || echo no)"
  grep -q '|recurring|' "$dir/all.worker" && grep -q '|transfer$' "$dir/all.worker" &&
    cmp -s "$dir/all.worker" "$dir/all.backend"
}
check "kvg_answer from 4 sessions at once in the worker: the same answers, and the same chain links stored" answers_in_worker

shared_cache() {
  local before after hits0 hits1 misses0 misses1 adb="${db}_w"
  read -r hits0 misses0 < <(psql -X -At -F ' ' -d "$db" -c "SELECT cache_hits, cache_misses FROM kvg_engine_worker()")
  # A new backend, which has read none of the entry's artifacts, asks again.
  after=$(PGOPTIONS="-c kvg.model=$model -c kvg.engine=worker" psql -X -q -At -d "$adb" \
    -c "SELECT answer || '|' || mode FROM kvg_answer_detail('What colour is box 2?', 8)")
  read -r hits1 misses1 < <(psql -X -At -F ' ' -d "$db" -c "SELECT cache_hits, cache_misses FROM kvg_engine_worker()")
  before=$(grep -m1 "|recurring|" "$dir/answers.worker.2" | cut -d'|' -f1-2)
  echo "# a new backend's recurring answer: cache hits $hits0 -> $hits1, misses $misses0 -> $misses1"
  [ "$after" = "$before" ] && [ "$hits1" -gt "$hits0" ] && [ "$misses1" = "$misses0" ]
}
check "a recurring answer from a backend that never read its entry grafts from the worker's cache" shared_cache

fingerprints() {
  local said copy=$dir/copy.gguf
  # TinyStories is loaded by now: a new backend takes its fingerprint from the table.
  said=$(PGOPTIONS="-c kvg.model=$model -c client_min_messages=debug1" psql -X -q -At -d "$db" \
    -c "SELECT kvg_model_info()->>'fingerprint'" 2>&1 | grep -o "model fingerprint of .*")
  # A copy is another file (another inode): hashed, with the same fingerprint.
  cp "$model" "$copy" && chmod 644 "$copy"
  local copied
  copied=$(PGOPTIONS="-c kvg.model=$copy -c client_min_messages=debug1" psql -X -q -At -d "$db" \
    -c "SELECT kvg_model_info()->>'fingerprint'" 2>&1)
  echo "# a new backend: $said; a copy: $(echo "$copied" | grep -o "model fingerprint of .*" | sed 's|.*/||')"
  [ "$said" = "model fingerprint of '$model' remembered" ] &&
    echo "$copied" | grep -q "model fingerprint of '$copy' computed" &&
    [ "$(echo "$copied" | tail -1)" = "$(psql -X -q -At -d "$db" -c "SET kvg.model = '$model'" \
      -c "SELECT kvg_model_info()->>'fingerprint'")" ]
}
check "a model's fingerprint is computed once per file for the server; a new file is hashed again" fingerprints

# Sessions calling in worker mode while the model file at their kvg.model is
# replaced with `mv`, again and again, by one of two models, and then cut
# short in place.
model_swaps() {
  local swap=$dir/swap.gguf other errors cut i
  other=$(dirname "$model")/stories260K.gguf
  cp "$model" "$swap" && chmod 644 "$swap" || return 1
  for i in 1 2 3 4; do
    ( for _ in $(seq 1 200); do echo "SELECT length(kvg_generate('Once upon a time', 4)) > 0;"; done |
        PGOPTIONS="-c kvg.model=$swap -c kvg.engine=worker" psql -X -q -At -d "$db" -v VERBOSITY=verbose \
          >"$dir/swap.$i" 2>&1 ) &
  done
  for i in $(seq 1 40); do
    if [ $((i % 2)) = 1 ]; then cp "$other" "$dir/swap.next"; else cp "$model" "$dir/swap.next"; fi
    chmod 644 "$dir/swap.next" && mv "$dir/swap.next" "$swap"
    sleep 0.05
  done
  wait
  errors=$(cat "$dir"/swap.[1-4] | grep -c '^ERROR')
  echo "# 4 sessions, 800 calls in the worker, the model replaced 40 times by mv: $errors errors" \
    "$(cat "$dir"/swap.[1-4] | grep -m1 '^ERROR')"
  # Cut short in place under the same load: each call that fails says the
  # file is no model (22023) or could not be read (58030), never that an
  # artifact is damaged.
  for i in 1 2 3 4; do
    ( for _ in $(seq 1 100); do echo "SELECT length(kvg_generate('Once upon a time', 4)) > 0;"; done |
        PGOPTIONS="-c kvg.model=$swap -c kvg.engine=worker" psql -X -q -At -d "$db" -v VERBOSITY=verbose \
          >"$dir/cut.$i" 2>&1 ) &
  done
  sleep 0.3
  truncate -s 100000 "$swap"
  wait
  cut=$(cat "$dir"/cut.[1-4] | grep '^ERROR' | grep -cvE '^ERROR:  (22023|58030):')
  echo "# cut short under load: $(cat "$dir"/cut.[1-4] | grep -c '^ERROR') calls failed, $cut of them with" \
    "another SQLSTATE than 22023 or 58030 $(cat "$dir"/cut.[1-4] | grep '^ERROR' | grep -m1 -vE '^ERROR:  (22023|58030):')"
  [ "$errors" = 0 ] && [ "$cut" = 0 ] && [ "$(cat "$dir"/cut.[1-4] | grep -c '^ERROR')" -ge 1 ]
}
check "a model replaced by mv under load fails no call in the worker; one cut short in place fails calls with 22023/58030" \
  model_swaps

# A call's backend loads its model (a file the worker never saw) and queues
# the call while the worker is stopped; another model is renamed over the
# path before the worker, continued, claims the call: the file at the path
# is not the caller's any more.
renamed_before_the_worker_saw_it() {
  local held=$dir/held.gguf other gen want got fresh theirs pid
  other=$(dirname "$model")/stories260K.gguf
  gen="SELECT encode(kvg_generate_bytes('Once upon a time', 8), 'hex')"
  cp "$model" "$dir/held.next" && chmod 644 "$dir/held.next" && mv "$dir/held.next" "$held" || return 1
  want=$(sql backend "$gen")
  theirs=$(sql backend "$gen" "$other")
  pid=$(worker_field pid)
  kill -STOP "$pid" && echo "$pid" >"$dir/stopped"
  ( PGAPPNAME=kvg_held sql worker "$gen" "$held" >"$dir/held.out" 2>&1 ) &
  for _ in $(seq 1 100); do  # until its backend waits for the worker
    [ "$(psql -X -At -d "$db" -c "SELECT count(*) FROM pg_stat_activity
           WHERE application_name = 'kvg_held' AND wait_event_type = 'Extension'")" = 1 ] && break
    sleep 0.05
  done
  cp "$other" "$dir/held.next" && chmod 644 "$dir/held.next" && mv "$dir/held.next" "$held"
  kill -CONT "$pid" && rm -f "$dir/stopped"
  wait $!
  got=$(cat "$dir/held.out")
  fresh=$(sql worker "$gen" "$held" 2>&1)
  echo "# a call's model renamed over before the worker saw it: the call equal to backend mode with its file:" \
    "$([ "$got" = "$want" ] && echo yes || echo "no ($got)");" \
    "a new call's equal to the new file's: $([ "$fresh" = "$theirs" ] && echo yes || echo "no ($fresh)")"
  [ -n "$want" ] && [ "$got" = "$want" ] && [ "$fresh" = "$theirs" ] && [ "$want" != "$theirs" ]
}
check "a call's model renamed over before the worker saw it: the worker computes with its backend's file" \
  renamed_before_the_worker_saw_it

# The worker's anonymous memory (RssAnon, kB) now.
worker_rss_kb() { awk '/^RssAnon:/ { print $2 }' "/proc/$(worker_field pid)/status"; }
flat_memory() {
  local calls="DO \$\$ BEGIN FOR i IN 1..%s LOOP PERFORM kvg_generate_bytes('Once upon a time', 1); END LOOP; END \$\$"
  local before after
  sql worker "$(printf "$calls" 1000)" >/dev/null || return 1  # warm-up
  before=$(worker_rss_kb)
  sql worker "$(printf "$calls" 20000)" >/dev/null || return 1
  after=$(worker_rss_kb)
  echo "# the worker's RssAnon after a warm-up of 1,000 calls: $before kB; after 20,000 more: $after kB"
  [ -n "$before" ] && [ -n "$after" ] && [ $((after - before)) -le 1024 ]
}
check "the worker's memory stays flat: at most 1 MB more after 20,000 calls" flat_memory

stopped_worker() {
  local pid t0 said secs after
  pid=$(worker_field pid)
  kill -STOP "$pid" && echo "$pid" >"$dir/stopped"
  t0=$(date +%s.%N)
  said=$(PGOPTIONS="-c kvg.model=$model -c kvg.engine=worker" timeout 120 psql -X -q -At -d "$db" \
    -v VERBOSITY=verbose -c "SELECT kvg_generate('Once upon a time', 8)" 2>&1)
  secs=$(python3 -c "import sys, time; print(round(time.time() - float(sys.argv[1]), 1))" "$t0")
  kill -CONT "$pid" && rm -f "$dir/stopped"
  after=$(sql worker "SELECT length(kvg_generate('Once upon a time', 8)) > 0" 2>&1)
  echo "# a call while the worker was stopped: $(echo "$said" | head -1) (after $secs s); continued, the next call: $after"
  echo "$said" | grep -q "57V02" && echo "$said" | grep -q "has not run for" &&
    python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < 20 else 1)" "$secs" && [ "$after" = t ]
}
check "a stopped worker (SIGSTOP) fails the calls that wait for it with 57V02 after 10 s; continued, it serves again" \
  stopped_worker

# wait_for_worker OLD_STARTS: a worker runs that started after OLD_STARTS starts.
wait_for_worker() {
  for _ in $(seq 1 100); do
    [ -n "$(psql -X -At -d "$db" -c "SELECT pid FROM kvg_engine_worker() WHERE starts > $1" 2>/dev/null)" ] && return 0
    sleep 0.2
  done
  return 1
}

terminated() {
  local i failed=0 starts pid
  starts=$(worker_field starts)
  pid=$(worker_field pid)
  for i in 1 2 3; do
    ( PGOPTIONS="-c kvg.model=$slow -c kvg.engine=worker" psql -X -q -At -d "$db" -v VERBOSITY=verbose \
        -c "$long_call" -c "SELECT 'next call'" -c "$long_call" >"$dir/held.$i" 2>&1 ) &
  done
  wait_running 3
  kill -TERM "$pid"  # (it has no database, so pg_terminate_backend does not know it)
  wait
  for i in 1 2 3; do
    grep -q "57V02" "$dir/held.$i" && grep -q "^next call$" "$dir/held.$i" &&
      [ "$(tail -1 "$dir/held.$i" | grep -cE '^[0-9a-f]+$')" = 1 ] || {
      failed=$((failed + 1))
      sed 's/^/#   /' "$dir/held.$i" | cut -c1-200
    }
  done
  echo "# held calls: $(grep -h 57V02 "$dir"/held.* | head -1)"
  wait_for_worker "$starts" && [ "$failed" = 0 ]
}
check "the worker terminated under load: held calls fail (57V02), it restarts, the same sessions go on" terminated

killed() {
  local i pid survivors answer
  pid=$(worker_field pid)
  for i in 1 2 3; do ( sql worker "$long_call" "$slow" >"$dir/killed.$i" 2>&1 ) & done
  wait_running 3
  kill -KILL "$pid"
  wait
  survivors=$(cat "$dir"/killed.* | grep -cE '^[0-9a-f]{20,}$')
  for _ in $(seq 1 100); do psql -X -At -d "$db" -c "SELECT 1" >/dev/null 2>&1 && break; sleep 0.2; done
  wait_for_worker 0 || return 1
  answer=$(sql worker "$long_call" "$slow")
  echo "# after SIGKILL: $survivors of 3 calls in flight returned; the worker is back; the next call equal:" \
    "$([ "$answer" = "$(cat "$dir/expected")" ] && echo yes || echo no)"
  [ "$survivors" = 0 ] && [ "$answer" = "$(cat "$dir/expected")" ] &&
    [ "$(psql -X -At -d "$db" -c "SELECT ok FROM kvg_audit_verify()")" = t ]
}
check "the worker SIGKILLed under load: calls in flight fail, server and worker return, same bytes, audit verifies" killed

echo "1..$n"
[ "$failures" = 0 ]
