#!/usr/bin/env bash
# Long calls are visible (#38): kvg.progress shows each backend's generation
# (extension/src/calls/call_progress.hpp) in the engine worker and in the
# backend; the decode's and the prefill's progress notices and counts reach a
# worker-mode caller; graft checks, verified imports and positional
# compositions report too, in both modes; another role sees the row but not its figures;
# kvg_engine_worker_reset() makes the worker's figures count from zero. Against the cluster scripts/pg-env.sh
# names. TAP lines: "ok N - ..." / "not ok N - ...".
# Usage: progress_test.sh DATABASE KVG (the kvg command writes a slow model)
set -uo pipefail
db=$1
kvg=$2
dir=$(mktemp -d /tmp/kvg-progress.XXXXXX)
chmod 755 "$dir"
trap 'rm -rf "$dir"; psql -X -q -d "$db" -c "DROP ROLE IF EXISTS progress_mallory" >/dev/null 2>&1' EXIT
# ~100 tokens/s here: a call of 96 tokens lasts long enough to be seen.
slow=$dir/slow.gguf
"$kvg" synth --out "$slow" --seed 3 --n-embd 768 --n-layer 6 --n-head 12 --vocab 512 --n-ctx 1024 >/dev/null &&
  chmod 644 "$slow" || { echo "not ok 1 - the slow synthetic model could not be written"; exit 1; }
n=0
failures=0
check() {  # check DESCRIPTION CONDITION-STATUS [DIAGNOSTIC]
  n=$((n + 1))
  if [ "$2" = 0 ]; then echo "ok $n - $1"; else echo "not ok $n - $1"; failures=$((failures + 1)); [ -n "${3:-}" ] && echo "# $3"; fi
}
q() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" "$@"; }
long_call="SELECT length(kvg_generate(repeat('Once upon a time there was a cat. ', 20), 96))"

# watch ENGINE [CALL]: a long call ($long_call unless named) in another
# session, and what kvg.progress shows of it, polled every 2 ms from this one
# until it ends; prints the rows seen.
watch() {
  PGOPTIONS="-c kvg.model=$slow -c kvg.engine=$1 -c kvg.device=cpu" psql -X -q -At -d "$db" -c "${2:-$long_call}" \
    >"$dir/call.$1" 2>&1 &
  local caller=$!
  q -c "CREATE TEMP TABLE seen AS SELECT * FROM kvg.progress WHERE false" \
    -c "DO \$\$ BEGIN FOR i IN 1..3000 LOOP
          INSERT INTO seen SELECT * FROM kvg.progress WHERE pid <> pg_backend_pid();
          EXIT WHEN i > 50 AND NOT EXISTS (SELECT FROM pg_stat_activity WHERE query LIKE '%kvg\\_%repeat(%'
                                                                          AND pid <> pg_backend_pid());
          PERFORM pg_sleep(0.002);
        END LOOP; END \$\$" \
    -c "SELECT datname, phase, prompt_tokens, prompt_tokens_done, max_tokens, tokens_decoded FROM seen"
  wait $caller
}
for engine in worker backend; do
  rows=$(watch $engine)
  check "$engine: the call succeeded" "$(grep -qx '[0-9][0-9]*' "$dir/call.$engine"; echo $?)" "$(head -3 "$dir/call.$engine")"
  echo "$rows" | sort | uniq -c | sort -rn | head -4 | sed 's/^/# /'
  echo "$rows" | grep -q "^$db|decode|[1-9][0-9]*|[0-9]*|96|[1-9][0-9]*$"
  check "$engine: kvg.progress shows the call decoding, tokens counted of max_tokens 96" $? "$(echo "$rows" | tail -2)"
  echo "$rows" | awk -F'|' '$4 > $3 || $6 > $5 { bad = 1 } END { exit bad }'
  check "$engine: never more done than the totals" $?
  [ "$(echo "$rows" | awk -F'|' '$2 == "decode" { print $6 }' | sort -n | uniq | wc -l)" -ge 3 ]
  check "$engine: the decoded count advances while it runs" $?
done
[ "$(q -c "SELECT count(*) FROM kvg.progress WHERE pid <> pg_backend_pid()")" = 0 ]
check "when the calls have ended, kvg.progress is empty" $?

# The worker's queue: with the worker busy (max_batch 1), a second call waits.
q -c "ALTER SYSTEM SET kvg.engine_max_batch = 1" -c "SELECT pg_reload_conf()" >/dev/null
sleep 1
PGOPTIONS="-c kvg.model=$slow -c kvg.engine=worker" psql -X -q -At -d "$db" -c "$long_call" >/dev/null 2>&1 &
first=$!
sleep 0.3
rows=$(watch worker)
wait $first
q -c "ALTER SYSTEM RESET kvg.engine_max_batch" -c "SELECT pg_reload_conf()" >/dev/null
# For the whole wait, not only until the worker takes the call from the
# request queue (it takes every call at once, then admits it when there is
# room): the first call decodes for most of a second meanwhile, hundreds of
# polls. Before admission was reported, a taken call showed as prefill, and
# queued lasted a poll or two.
queued=$(echo "$rows" | grep -c "^$db|queued|")
[ "$queued" -ge 20 ]
check "a call waiting for the busy worker shows as queued while it waits ($queued polls)" $? \
  "$(echo "$rows" | sort | uniq -c | sort -rn | head -5)"

# A caller terminated while it waits for the worker (a FATAL, which unwinds
# nothing) leaves no row behind.
PGOPTIONS="-c kvg.model=$slow -c kvg.engine=worker" PGAPPNAME=kvg_progress_doomed psql -X -q -At -d "$db" \
  -c "$long_call" >/dev/null 2>&1 &
doomed=$!
gone=$(q -c "DO \$\$ BEGIN FOR i IN 1..10000 LOOP
         PERFORM pg_stat_clear_snapshot();  -- pg_stat_activity is read once a transaction otherwise
         EXIT WHEN EXISTS (SELECT FROM kvg.progress p JOIN pg_stat_activity a USING (pid)
                           WHERE a.application_name = 'kvg_progress_doomed' AND p.phase = 'decode');
         PERFORM pg_sleep(0.002);
       END LOOP; END \$\$" \
  -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'kvg_progress_doomed'" \
  -c "SELECT pg_sleep(0.5)" -c "SELECT count(*) FROM kvg.progress WHERE pid <> pg_backend_pid()" \
  -c "SELECT * FROM kvg.progress WHERE pid <> pg_backend_pid()")
wait $doomed
[ "$(echo "$gone" | tail -1)" = 0 ] && [ "$(echo "$gone" | head -1)" = t ]  # terminated; no row left
check "a caller terminated while its call runs in the worker leaves no row in kvg.progress" $? "$gone"

# Notices: the decode's progress reaches a caller whose call runs in the worker.
out=$(PGOPTIONS="-c kvg.model=$slow -c kvg.engine=worker -c kvg.progress_notices=100" \
  psql -X -q -At -d "$db" -c "$long_call" 2>&1)
echo "$out" | grep -q "NOTICE:  kvg generate: decoded [0-9]* of 96 tokens"
check "kvg.progress_notices reaches a worker-mode caller (the decode's)" $? "$(echo "$out" | head -3)"

# The prefill's progress comes from the worker too (its PrefilledReply): a
# capture, which only prefills, sends notices and shows its prompt's tokens
# counted in kvg.progress as the worker computes them.
capture="SELECT kvg_capture(repeat('Once upon a time there was a dog. ', 24))"
out=$(PGOPTIONS="-c kvg.model=$slow -c kvg.engine=worker -c kvg.progress_notices=50" \
  psql -X -q -At -d "$db" -c "$capture" 2>&1)
echo "$out" | grep -q "NOTICE:  kvg capture: prefilled [0-9]* of [0-9]* tokens"
check "a capture in the worker sends the prefill's progress notices" $? "$(echo "$out" | head -3)"
rows=$(watch worker "$capture")
echo "$rows" | sort | uniq -c | sort -rn | head -3 | sed 's/^/# /'
[ "$(echo "$rows" | awk -F'|' '$2 == "prefill" && $4 > 0 && $4 < $3 { print $4 }' | sort -n | uniq | wc -l)" -ge 2 ]
check "kvg.progress counts a worker capture's prompt tokens as they are computed" $? "$(echo "$rows" | tail -2)"

# A graft check, a verified import and a positional composition report as
# generations do, in either mode: their prefill's notices, and kvg.progress
# counting a graft check's two sides (its prompt twice; 16 sampled tokens
# each, 32 in all) as they are computed.
art=$(PGOPTIONS="-c kvg.model=$slow -c kvg.engine=backend" q -c \
  "SELECT kvg_capture(repeat('Once upon a time there was a dog. ', 12))")
block=$(PGOPTIONS="-c kvg.model=$slow -c kvg.engine=backend" q -c "SELECT kvg_capture('Lily had a red ball.')")
check_call="SELECT exact FROM kvg_graft_check('$art', repeat(' The dog ran to the park.', 12), 1)"
for engine in worker backend; do
  out=$(PGOPTIONS="-c kvg.model=$slow -c kvg.engine=$engine -c kvg.device=cpu -c kvg.progress_notices=1" \
    psql -X -q -At -d "$db" -c "$check_call" -c "SELECT kvg_import(kvg_export('$art')) = '$art'" \
    -c "SELECT tokens_composed > 0 FROM kvg_generate_positional(ARRAY['$art', '$block'], ' The dog ran.', 4)" 2>&1)
  said=""
  for what in "graft check" "import verify" "generate_positional"; do
    echo "$out" | grep -q "NOTICE:  kvg $what: prefilled [0-9]* of [0-9]* tokens" && said="$said|$what"
  done
  results=$(echo "$out" | grep -v '^NOTICE\|^DETAIL' | tr '\n' ' ')
  [ "$said" = "|graft check|import verify|generate_positional" ] && [ "$results" = "t t t " ]
  check "$engine: a graft check, a verified import and a positional composition send prefill notices" $? \
    "notices from:$said; results: $results $(echo "$out" | grep -m2 ERROR)"
  rows=$(watch $engine "$check_call")
  echo "$rows" | sort | uniq -c | sort -rn | head -3 | sed 's/^/# /'
  [ "$(echo "$rows" | awk -F'|' '$2 == "prefill" && $4 > 0 && $4 < $3 && $5 == 32 { print $4 }' | sort -n | uniq |
       wc -l)" -ge 2 ] && echo "$rows" | grep -q "^$db|decode|[0-9]*|[0-9]*|32|[1-9][0-9]*$"
  check "$engine: kvg.progress counts a graft check's two sides, prefill and decode" $? "$(echo "$rows" | tail -2)"
done

# Another role sees that a call runs, not how far.
q -c "CREATE ROLE progress_mallory IN ROLE kvg_user LOGIN" >/dev/null
PGOPTIONS="-c kvg.model=$slow -c kvg.engine=worker" psql -X -q -At -d "$db" -c "$long_call" >/dev/null 2>&1 &
caller=$!
seen=$(psql -X -q -At -U progress_mallory -d "$db" -c "DO \$\$ BEGIN FOR i IN 1..2000 LOOP
         EXIT WHEN EXISTS (SELECT FROM kvg.progress WHERE pid <> pg_backend_pid()); PERFORM pg_sleep(0.002);
       END LOOP; END \$\$" -c "SELECT pid IS NOT NULL, phase IS NULL, tokens_decoded IS NULL FROM kvg.progress
                               WHERE pid <> pg_backend_pid()" 2>&1)
wait $caller
[ "$seen" = "t|t|t" ]
check "another role sees the pid of a call, and NULL for its phase and figures" $? "$seen"

# Resetting the worker's figures.
err=$(psql -X -q -At -U progress_mallory -d "$db" -c "SELECT kvg_engine_worker_reset()" 2>&1)
[[ "$err" == *"permission denied"* ]]
check "a kvg_user may not reset the worker's figures" $? "$err"
before=$(q -c "SELECT served FROM kvg.engine_worker")
reset=$(q -c "SELECT kvg_engine_worker_reset() IS NOT NULL" -c "SELECT served, passes, batch_peak, stats_reset IS NOT NULL FROM kvg.engine_worker")
[ "$reset" = "$(printf 't\n0|0|0|t')" ] && [ "$before" -gt 0 ]
check "kvg_engine_worker_reset(): served ($before), passes and batch peak count from zero, stats_reset says when" $? "$reset"
PGOPTIONS="-c kvg.model=$slow -c kvg.engine=worker" psql -X -q -At -d "$db" \
  -c "SELECT length(kvg_generate('Once upon a time', 4))" >/dev/null
after=$(q -c "SELECT served, passes > 0, batch_peak FROM kvg.engine_worker")
[ "$after" = "1|t|1" ]
check "and the next call counts 1 served, its passes and its batch" $? "$after"

echo "1..$n"
[ "$failures" = 0 ]
