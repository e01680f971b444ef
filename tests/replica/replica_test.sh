#!/usr/bin/env bash
# Read replicas, the real thing: a primary and a hot standby made with
# pg_basebackup -R, streaming over a Unix socket (docs/scale-out.md).
#   - the same answer bytes on both; artifacts export and verify on the standby,
#     for their owners only (another user is refused, 42501)
#   - the standby's audit rows are on the primary, in one chain that verifies,
#     with the standby's role and hashes, and its answers' templates; one
#     forwarding connection per backend
#   - writes are refused on the standby (25006), a missing or bad
#     kvg.audit_conninfo is a clear error, the setting is hidden from others
#   - an artifact not yet replayed: a clear error naming the replay position
#   - statement_timeout while the primary is slow to record: 57014, nothing
#     pending, the chain verifies
#   - the primary stopped mid-answer (08006) and mid-batch: every answer the
#     standby returned is recorded on the primary
#   - the primary down: the standby refuses (08001), or answers with a WARNING
#     and no audit id when a superuser allows it (kvg.allow_unaudited)
#   - the standby promoted during a batch: it audits locally, continuing the
#     chain, which verifies
# Prints "ok N - ..." / "not ok N - ..." and a "replica: P passed, F failed"
# line (scripts/test.sh counts them); exits non-zero on any failure.
#
# Ports KVG_REPLICA_PORT (default KVG_PGPORT + 13, i.e. 55445) and the next
# one; data under <pg_run>/replica (scripts/pg-env.sh), removed at the end.
# Needs the extension installed (scripts/pg-cluster.sh start does that).
set -uo pipefail
source "$(dirname "$0")/../../scripts/pg-env.sh"
pport=${KVG_REPLICA_PORT:-$((pg_port + 13))}
pair_dir=$pg_run/replica
pair_db=kvg_replica
source "$repo/scripts/replica-pair.sh"
dir=$pair_dir
model=$(stage_for_server "${KVG_TEST_DATA:-$repo/tests/data}/models/stories260K.gguf" models) || exit 1
passed=0
failed=0
n=0

ok() {  # ok DESCRIPTION CONDITION-STATUS [DIAGNOSTIC]
  n=$((n + 1))
  if [ "$2" = 0 ]; then
    echo "ok $n - $1"
    passed=$((passed + 1))
  else
    echo "not ok $n - $1"
    [ -n "${3:-}" ] && echo "$3" | sed 's/^/#   /'
    failed=$((failed + 1))
  fi
}
is() {  # is DESCRIPTION GOT EXPECTED
  [ "$2" = "$3" ]
  ok "$1" $? "got:      $2
expected: $3"
}
# error PORT SQL...: "SQLSTATE: message" of the first ERROR (nothing if none).
error() {
  local port=$1
  shift
  local args=()
  for sql in "$@"; do args+=(-c "$sql"); done
  pair_on "$port" -v VERBOSITY=verbose "${args[@]}" 2>&1 >/dev/null | sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\): /\1: /p' | head -1
}
# until_true SQL-ON-PRIMARY: waits (up to 30 s) until it returns t.
until_true() {
  for _ in $(seq 1 300); do
    [ "$(p -c "$1" 2>/dev/null)" = t ] && return 0
    sleep 0.1
  done
  return 1
}

trap pair_remove EXIT
mkdir -p "$pg_run"
echo "replica test: primary on port $pport, standby on port $sport, data in $dir"
pair_create "$model" "fsync = off" || exit 1
q="What color is the sky?"
p -c "SELECT kvg_learn('$q', 'contains', 'The sky is blue.', 'blue')" >/dev/null || exit 1
# replica_alice's: artifacts are private to who stored them (docs/security.md).
artifact=$(p -U replica_alice -c "SELECT kvg_capture('Once upon a time')") || exit 1
p -c "CREATE ROLE replica_mallory IN ROLE kvg_user" >/dev/null || exit 1
# A function verifier: on the standby too it runs in a worker of its own, as
# kvg_verifier (read-only there; its transaction is rolled back anyway).
vq="Who runs the replica verifier?"
p -c "CREATE SCHEMA replica_v" -c "GRANT USAGE ON SCHEMA replica_v TO PUBLIC" \
  -c "CREATE FUNCTION replica_v.whoami(q text, a text) RETURNS boolean LANGUAGE sql RETURN current_user = 'kvg_verifier'" \
  -c "SELECT kvg_learn('$vq', 'replica_v.whoami', 'The replica verifier runs.', 'runs')" >/dev/null || exit 1
pair_wait_replay || exit 1

echo "# answers on both servers"
is "the standby is a hot standby" "$(s -c 'SELECT pg_is_in_recovery()')" t
# A standby stores nothing (refused below), so it charges nothing; it shows
# the primary's charges (docs/security.md, "One storage quota").
usage="SELECT string_agg(role || ' ' || artifacts || ' ' || bytes, ', ' ORDER BY role) FROM kvg.storage_usage"
is "kvg.storage_usage on the standby is the primary's" "$(s -c "$usage")" "$(p -c "$usage")"
# kvg_answer_detail: the small model's answer fails the entry's verifier, and
# kvg_answer would compare two NULLs.
answer_hex="SELECT mode, verified, encode(convert_to(answer, 'UTF8'), 'hex') FROM kvg_answer_detail('$q')"
primary_answer=$(p -U replica_alice -c "$answer_hex")
is "the same answer bytes on primary and standby (recurring)" "$(s -U replica_alice -c "$answer_hex")" "$primary_answer"
gen="SELECT encode(kvg_generate_bytes(' there was', 24, '$artifact'), 'hex')"
is "the same kvg_generate bytes after grafting a replicated artifact" "$(s -c "$gen")" "$(p -c "$gen")"
# Transfer mode would store the composition on a primary; a standby computes
# it without storing (asked there first, so nothing stored helps it).
related="SELECT mode, encode(convert_to(answer, 'UTF8'), 'hex') FROM kvg_answer_detail('What color is the sky today?')"
standby_related=$(s -c "$related")
is "transfer mode on the standby: the same answer bytes, nothing stored" "$standby_related" "$(p -c "$related")"
is "... and it was a transfer answer" "${standby_related%%|*}" transfer
verdict="SELECT verified FROM kvg_answer_detail('$vq')"
standby_verdict=$(s -U replica_alice -c "$verdict")
is "a function verifier's verdict on the standby is the primary's" "$standby_verdict" "$(p -U replica_alice -c "$verdict")"
is "... and it passed: it ran, as kvg_verifier" "$standby_verdict" t
is "kvg_artifact_verify on the standby" "$(s -c "SELECT (kvg_artifact_verify('$artifact')).ok")" t
export_md5="SELECT md5(kvg_export('$artifact'))"
is "kvg_export gives the same bytes on the standby" "$(s -c "$export_md5")" "$(p -c "$export_md5")"
err=$(error "$sport" "SET SESSION AUTHORIZATION replica_mallory" "SELECT kvg_export('$artifact')")
[[ "$err" == "42501: artifact $artifact is not stored, or is not yours to read"* ]]
ok "on the standby too, another user's kvg_export of replica_alice's capture is refused (42501)" $? "$err"
is "kvg_graft_check on the standby is exact" \
  "$(s -c "SELECT exact FROM kvg_graft_check('$artifact', ' there was')")" t

echo "# the standby's audit rows are on the primary"
read -r audit_id answer_text < <(s -U replica_alice -F ' ' -c "SELECT audit_id, answer FROM kvg_answer_detail('$q')")
row=$(p -c "SELECT role, operation, mode, input_sha256 = encode(sha256(convert_to('$q', 'UTF8')), 'hex'),
                   output_sha256 = encode(sha256(convert_to(output_text, 'UTF8')), 'hex'), output_text, seq > 0
            FROM kvg.audit WHERE id = ${audit_id:-0}")
is "the standby's answer has its row on the primary (role, operation, hashes, output, seq)" "$row" \
  "replica_alice|answer|recurring|t|t|$answer_text|t"
is "the graft check's row is on the primary" \
  "$(p -c "SELECT count(*) FROM kvg.audit WHERE operation = 'graft_check' AND artifact_sha256 = '$artifact'")" 1
is "the forwarded row took the primary's audit writer, naming no transaction of the primary, the standby's session" \
  "$(p -c "SELECT caller_xid IS NULL, session_role, max_tokens, stop_reason IS NOT NULL,
                  prompt_tokens_sha256 ~ '^[0-9a-f]{64}\$', template_sha256 ~ '^[0-9a-f]{64}\$'
           FROM kvg.audit WHERE id = ${audit_id:-0}")" "t|replica_alice|32|t|t|t"
s -U replica_alice -c "SET kvg.knowledge_template = E'Story: {solution}\\n{question}'" \
  -c "SELECT count(*) FROM kvg_answer_detail('$q')" >/dev/null
is "the template of a standby's answer is recorded on the primary, by the hash its row names" \
  "$(p -c "SELECT t.template FROM kvg.audit a JOIN kvg.knowledge_templates t ON t.sha256 = a.template_sha256
           WHERE a.operation = 'answer' ORDER BY a.id DESC LIMIT 1")" "$(printf 'Story: {solution}\n{question}')"
# A sampled call's row carries what reproduces it (kvg reproduce), forwarded too.
sampled=$(s -U replica_alice -c "SELECT kvg_generate(' there was', 6, '$artifact', seed => 4242, temperature => 0.8)")
is "a standby's sampled generate: its row on the primary has temperature, seed, max_tokens and the artifact chain" \
  "$(p -c "SELECT temperature, seed, max_tokens, artifact_chain = '$artifact', output_text = \$\$$sampled\$\$
           FROM kvg.audit WHERE operation = 'generate' AND session_role = 'replica_alice' ORDER BY seq DESC LIMIT 1")" \
  "0.8|4242|6|t|t"
is "the primary's chain verifies" "$(p -c 'SELECT (kvg_audit_verify()).ok')" t
pair_wait_replay
is "the standby replays the rows it forwarded, and its copy verifies" \
  "$(s -c "SELECT count(*) FILTER (WHERE id = ${audit_id:-0}), (kvg_audit_verify()).ok FROM kvg.audit")" "1|t"
# One connection per backend: two answers, then a pause to look from the primary.
s -c "SELECT kvg_answer('$q')" -c "SELECT kvg_answer('$q')" -c "SELECT pg_sleep(5)" >/dev/null &
reuser=$!
for _ in $(seq 1 300); do
  [ "$(s -c "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(5)' AND state = 'active'")" = 1 ] && break
  sleep 0.1
done
is "one standby session keeps one connection to the primary" \
  "$(p -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'kvg audit forwarder' AND usename = 'standby_audit'")" 1
wait $reuser

echo "# what a standby refuses"
for call in "kvg_capture('Lily had a red ball')" "kvg_learn('Who had a ball?', 'contains', 'Lily had a red ball.', 'Lily')" \
  "kvg_solve('$q', 'exact:blue')" "kvg_import(kvg_export('$artifact'))"; do
  err=$(error "$sport" "SELECT $call")
  [[ "$err" == "25006: "*"cannot run on a standby"* ]]
  ok "refused on the standby: ${call%%(*}" $? "$err"
done
err=$(error "$sport" "SET kvg.audit_conninfo = ''" "SELECT kvg_answer('$q')")
[[ "$err" == "55000: "*"kvg.audit_conninfo is not set"* ]]
ok "no kvg.audit_conninfo: refused (55000)" $? "$err"
# Checked once the library defines the setting (before, it is a placeholder).
err=$(error "$sport" "LOAD 'kvg'" "SET kvg.audit_conninfo = 'no equals sign'")
[ "${err%%:*}" = 22023 ]
ok "a kvg.audit_conninfo libpq cannot parse is refused when set (22023)" $? "$err"
err=$(error "$sport" "LOAD 'kvg'" "SET ROLE replica_alice" "SHOW kvg.audit_conninfo")
[ "${err%%:*}" = 42501 ]
ok "kvg.audit_conninfo is hidden from other roles (it may hold a password)" $? "$err"

echo "# a standby behind the primary"
s -c "SELECT pg_wal_replay_pause()" >/dev/null
for _ in $(seq 1 100); do
  [ "$(s -c 'SELECT pg_get_wal_replay_pause_state()')" = paused ] && break
  sleep 0.1
done
late=$(p -c "SELECT kvg_capture('Lily had a red ball')")
p -c "SELECT kvg_learn('Who had a ball?', 'contains', 'Lily had a red ball.', 'Lily')" >/dev/null
err=$(error "$sport" "SELECT kvg_generate(' and', 8, '$late')")
[[ "$err" == "42704: artifact $late is not stored on this standby, which has replayed the primary's WAL up to "* ]]
ok "an artifact not yet replayed: a clear error (42704, with the replay position)" $? "$err"
is "an entry not yet replayed: the standby answers from what it has (not recurring)" \
  "$(s -c "SELECT mode <> 'recurring' FROM kvg_answer_detail('Who had a ball?')")" t
s -c "SELECT pg_wal_replay_resume()" >/dev/null
pair_wait_replay
gen="SELECT encode(kvg_generate_bytes(' and', 8, '$late'), 'hex')"
is "once replayed, the artifact grafts on the standby, same bytes" "$(s -c "$gen")" "$(p -c "$gen")"
is "once replayed, the entry answers recurring on the standby" \
  "$(s -c "SELECT mode FROM kvg_answer_detail('Who had a ball?')")" recurring

echo "# interrupts while the primary records"
p -c "BEGIN" -c "LOCK TABLE kvg.audit_head IN EXCLUSIVE MODE" -c "SELECT pg_sleep(4)" -c "COMMIT" >/dev/null &
locker=$!
until_true "SELECT count(*) = 1 FROM pg_locks WHERE relation = 'kvg.audit_head'::regclass AND mode = 'ExclusiveLock' AND granted"
began=$(date +%s%N)
# The model is loaded first, so that the second is spent waiting for the primary.
err=$(error "$sport" "SELECT kvg_model_info()" "SET statement_timeout = '1s'" "SELECT kvg_answer('$q')")
took=$((($(date +%s%N) - began) / 1000000))
[[ "$err" == "57014: canceling statement due to statement timeout"* ]] && [ "$took" -lt 3500 ]
ok "statement_timeout interrupts the wait for the primary (57014 after ${took} ms)" $? "$err"
wait $locker
sleep 0.5
is "after the interrupted forward: the chain verifies" "$(p -c 'SELECT (kvg_audit_verify()).ok')" t

echo "# the primary down mid-answer"
p -c "BEGIN" -c "LOCK TABLE kvg.audit_head IN EXCLUSIVE MODE" -c "SELECT pg_sleep(30)" >/dev/null 2>&1 &
locker=$!
# The lock first: an answer sent before it is taken is recorded at once.
until_true "SELECT count(*) = 1 FROM pg_locks WHERE relation = 'kvg.audit_head'::regclass AND mode = 'ExclusiveLock' AND granted"
pair_on "$sport" -v VERBOSITY=verbose -c "SELECT kvg_answer('$q')" >"$dir/mid_answer.out" 2>&1 &
answering=$!
# The forwarded append waits for the primary's audit writer, which waits for
# the head's lock: the primary is stopped then.
until_true "SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'kvg audit writer' AND wait_event_type = 'Lock'"
waited=$?
pair_stop primary
wait $answering $locker
err=$(sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\): /\1: /p' "$dir/mid_answer.out" | head -1)
[[ "$err" == "08006: "*"connection to the primary broke"* ]]
ok "the primary stopped while recording: 08006, no answer returned" $? \
  "the forwarder was seen waiting for the lock: $([ $waited = 0 ] && echo yes || echo no)
the standby session printed:
$(cat "$dir/mid_answer.out")
the standby's log:
$(tail -15 "$dir/standby.log")
the primary's log:
$(tail -15 "$dir/primary.log")"
pair_start primary || exit 1
is "after the restart the chain verifies" "$(p -c 'SELECT (kvg_audit_verify()).ok')" t
# A standby session whose connection the restart closed opens a new one. Its
# second answer comes 20 s after the first: time for the restart below even on
# a loaded machine (a restart not done by then fails this check, visibly).
rows_before=$(p -c "SELECT count(*) FROM kvg.audit")
s -c "SELECT kvg_answer('$q')" -c "SELECT pg_sleep(20)" -c "SELECT audit_id FROM kvg_answer_detail('$q')" \
  >"$dir/reconnect.out" 2>&1 &
session=$!
# The first answer's row is on the primary (so the restart cannot cut into it).
until_true "SELECT count(*) > $rows_before FROM kvg.audit"
restart_started=$(date +%s)
pair_stop primary
pair_start primary || exit 1
echo "# the primary restarted in $(($(date +%s) - restart_started)) s"
wait $session
id=$(tail -1 "$dir/reconnect.out")
[[ "$id" =~ ^[0-9]+$ ]] || id=0
is "after a primary restart, an open standby session reconnects and is audited" \
  "$(p -c "SELECT count(*) FROM kvg.audit WHERE id = $id")" 1
[ "$id" != 0 ] || sed 's/^/#   /' "$dir/reconnect.out"

# batch PORT SECONDS FILE: separate sessions answering for that long; each
# audit id returned goes to FILE, each error counts in FILE.errors.
batch() {
  local port=$1 until=$(($(date +%s) + $2)) file=$3
  : >"$file"
  : >"$file.errors"
  while [ "$(date +%s)" -lt "$until" ]; do
    pair_on "$port" -U replica_alice -c "SELECT audit_id FROM kvg_answer_detail('$q')" >>"$file" 2>>"$file.errors" ||
      echo >>"$file.errors"
  done
}
echo "# the primary stopped during a batch of answers on the standby"
pair_wait_replay
batch "$sport" 5 "$dir/batch1" &
batcher=$!
sleep 2
pair_stop primary
wait $batcher
pair_start primary || exit 1
returned=$(grep -c . "$dir/batch1")
ids=$(paste -sd, "$dir/batch1")
recorded=$(p -c "SELECT count(*) FROM kvg.audit WHERE operation = 'answer' AND role = 'replica_alice' AND id IN (${ids:-0})")
[ "$returned" -gt 0 ] && [ "$(grep -c '08001\|08006\|primary' "$dir/batch1.errors")" -gt 0 ] && [ "$recorded" = "$returned" ]
ok "every answer returned before and after the stop ($returned) is recorded on the primary ($recorded)" $? \
  "$(head -3 "$dir/batch1.errors")"
is "the primary's chain verifies" "$(p -c 'SELECT (kvg_audit_verify()).ok')" t

echo "# the primary down"
pair_wait_replay
rows_before=$(p -c "SELECT count(*) FROM kvg.audit")
pair_stop primary
err=$(error "$sport" "SELECT kvg_answer('$q')")
[[ "$err" == "08001: kvg: this standby cannot reach the primary"* ]]
ok "the primary stopped: the standby refuses answers (08001)" $? "$err"
err=$(error "$sport" "SELECT kvg_generate('Once upon a time', 4)")
[ "${err%%:*}" = 08001 ]
ok "... and kvg_generate" $? "$err"
is "... while reading artifacts still works" "$(s -c "SELECT (kvg_artifact_verify('$artifact')).ok")" t
out=$(s -c "SET kvg.allow_unaudited = on" -c "SELECT audit_id IS NULL, answer FROM kvg_answer_detail('$q')" 2>&1)
[[ "$out" == *"WARNING:  kvg: the result of this answer call is NOT audited"* ]] && [[ "$out" == *"t|$answer_text"* ]]
ok "kvg.allow_unaudited: the answer with a WARNING and no audit id" $? "$out"
err=$(error "$sport" "LOAD 'kvg'" "SET ROLE replica_alice" "SET kvg.allow_unaudited = on")
[ "${err%%:*}" = 42501 ]
ok "only a superuser may allow unaudited answers" $? "$err"
# kvg is preloaded, so the setting exists from a session's first statement:
# no placeholder a role could set before the library loads.
err=$(error "$sport" "SET ROLE replica_alice" "SET kvg.allow_unaudited = on" "SELECT kvg_answer('$q')")
[ "${err%%:*}" = 42501 ]
ok "... refused at SET from the first statement (kvg is preloaded)" $? "$err"

echo "# the standby promoted during a batch"
# The batch runs until the promotion is done and then answers a few more
# times: how long a promotion takes depends on the machine, and a fixed
# window once closed before the first answer after it on a slow CI runner.
promoted="$dir/promoted"
rm -f "$promoted"
batch_through_promotion() {
  local file=$1 after=0 until=$(($(date +%s) + 120))
  : >"$file"
  : >"$file.errors"
  while [ "$after" -lt 3 ] && [ "$(date +%s)" -lt "$until" ]; do
    [ -e "$promoted" ] && after=$((after + 1))
    pair_on "$sport" -U replica_alice -c "SELECT audit_id FROM kvg_answer_detail('$q')" >>"$file" 2>>"$file.errors" ||
      echo >>"$file.errors"
  done
}
batch_through_promotion "$dir/batch2" &
batcher=$!
sleep 1.5
as_postgres "$pg_bin/pg_ctl" -D "$dir/standby" -w promote >/dev/null
touch "$promoted"
wait $batcher
is "the standby is promoted" "$(s -c 'SELECT pg_is_in_recovery()')" f
returned=$(grep -c . "$dir/batch2")
ids=$(paste -sd, "$dir/batch2")
recorded=$(s -c "SELECT count(*) FROM kvg.audit WHERE operation = 'answer' AND id IN (${ids:-0})")
[ "$returned" -gt 0 ] && [ "$recorded" = "$returned" ]
ok "answers after the promotion ($returned) are audited locally ($recorded)" $? "$(head -3 "$dir/batch2.errors")"
is "its chain continues the primary's (every earlier row kept) and verifies" \
  "$(s -c "SELECT count(*) >= $rows_before + $returned, max(seq) = count(*), (kvg_audit_verify()).ok FROM kvg.audit")" \
  "t|t|t"
is "the promoted server learns" \
  "$(s -c "SELECT kvg_learn('What does Lily have?', 'contains', 'Lily has a red ball.', 'ball') > 0, (kvg_audit_verify()).ok")" "t|t"

echo "replica: $passed passed, $failed failed"
[ "$failed" = 0 ]
