#!/usr/bin/env bash
# Preloading, then crash safety. Without shared_preload_libraries = 'kvg',
# CREATE EXTENSION kvg is refused with the line to add. Then: SIGKILL a
# backend in the middle of captures (large-object
# writes), of kvg_learn, and of audited answers, SIGKILL the audit writer
# during appends, and stop the server with `pg_ctl stop -m immediate` during
# a batch of answers. After each restart: every kvg.artifacts row's object
# verifies, no object is without a row, no knowledge entry is half-written,
# no committed caller's learn row lacks its entry, every answer a client
# received has its row, and kvg_audit_verify() is ok. Prints what it
# killed and what it found.
#
# Runs its own throwaway cluster (a temporary directory, port KVG_PGPORT+100,
# Unix socket only), so the crash restarts never touch another test's server.
# Needs the extension installed (scripts/pg-cluster.sh start does that).
#   tests/crash/crash_test.sh            (from scripts/pg-test.sh)
set -uo pipefail
source "$(dirname "$0")/../../scripts/pg-env.sh"
model=${KVG_CRASH_MODEL:-${KVG_TEST_DATA:-$repo/tests/data}/models/stories260K.gguf}
[ -f "$model" ] || { echo "crash test: no model at $model"; exit 1; }
port=$((pg_port + 100))
dir=$(mktemp -d /tmp/kvg-crash.XXXXXX)
[ "$(id -u)" = 0 ] && chown postgres: "$dir"
data=$dir/data
export PGHOST=$dir PGPORT=$port PGUSER=postgres PGDATABASE=crash
failures=0

ctl() { as_postgres "$pg_bin/pg_ctl" -D "$data" -l "$dir/server.log" -w "$@" >/dev/null; }
q() { psql -X -At -v ON_ERROR_STOP=1 -c "$1"; }
cleanup() {
  as_postgres "$pg_bin/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1
  rm -rf "$dir"
}
trap cleanup EXIT

init_private_cluster "$data" "$dir" "$port" "max_connections = 20" "shared_buffers = 32MB" \
  "restart_after_crash = on" || exit 1
# First without kvg preloaded: CREATE EXTENSION refuses, naming the line to add.
ctl start || { cat "$dir/server.log"; exit 1; }
refusal=$(psql -X -q -d postgres -v VERBOSITY=verbose -c "CREATE EXTENSION kvg" 2>&1)
ctl stop -m fast
if [[ "$refusal" == *"55000"*"shared_preload_libraries = 'kvg'"* ]]; then
  echo "  without shared_preload_libraries: CREATE EXTENSION kvg refused (55000), naming the line to add: ok"
else
  echo "  FAILED: CREATE EXTENSION kvg without preloading said: $refusal"
  failures=$((failures + 1))
fi
cat >>"$data/postgresql.conf" <<CONF
# kvg is loaded at server start: its settings, and its audit writers
# (background workers, one per database with calls in flight).
shared_preload_libraries = 'kvg'
max_worker_processes = 16
CONF
ctl start || { cat "$dir/server.log"; exit 1; }
psql -X -q -d postgres -c "CREATE DATABASE crash" || exit 1
q "CREATE EXTENSION kvg" >/dev/null || exit 1
q "ALTER DATABASE crash SET kvg.model = '$model'" >/dev/null
q "ALTER DATABASE crash SET kvg.device = 'cpu'" >/dev/null
# Something committed before the crashes: it must survive them intact.
q "SELECT kvg_capture('Once upon a time')" >/dev/null || exit 1
q "SELECT kvg_learn('What color is the sky?', 'contains', 'The sky is blue.', 'blue')" >/dev/null || exit 1
q "SELECT kvg_answer('What color is the sky?')" >/dev/null || exit 1

wait_ready() {
  for _ in $(seq 1 120); do
    psql -X -At -c 'SELECT 1' >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "crash test: the server did not come back"; cat "$dir/server.log" | tail -20
  return 1
}

# The checks after a restart; prints what it found, counts failures.
check() {
  local what=$1
  wait_ready || { failures=$((failures + 1)); return; }
  local found
  # Artifacts that the audit writer committed for a killed caller are
  # unreferenced, for kvg_vacuum (docs/audit-chain.md, "Artifacts"): counted,
  # not a problem; an object without its row or a row without its object is.
  found=$(q "SELECT format('%s artifacts (%s verify, %s unreferenced), %s orphans, '
                           '%s knowledge entries (%s half-written), '
                           '%s audit rows (%s of rolled-back callers), chain %s',
    (SELECT count(*) FROM kvg.artifacts),
    (SELECT count(*) FILTER (WHERE (kvg_artifact_verify(sha256)).ok) FROM kvg.artifacts),
    (SELECT count(*) FROM kvg_orphans() WHERE kind = 'unreferenced_artifact'),
    (SELECT count(*) FROM kvg_orphans() WHERE kind <> 'unreferenced_artifact'),
    (SELECT count(*) FROM kvg.knowledge),
    (SELECT count(*) FROM kvg.knowledge k
      WHERE NOT EXISTS (SELECT FROM kvg.artifacts a WHERE a.sha256 = k.artifact_sha256)
         OR NOT EXISTS (SELECT FROM kvg.audit u WHERE u.operation = 'learn' AND u.knowledge_id = k.id)),
    (SELECT count(*) FROM kvg.audit),
    (SELECT count(*) FROM kvg.audit WHERE pg_xact_status(caller_xid) = 'aborted'),
    (SELECT CASE WHEN ok THEN 'verifies' ELSE 'broken at seq ' || first_bad END FROM kvg_audit_verify()))" 2>&1)
  local bad
  bad=$(q "SELECT (SELECT count(*) FILTER (WHERE NOT (kvg_artifact_verify(sha256)).ok) FROM kvg.artifacts)
                + (SELECT count(*) FROM kvg_orphans() WHERE kind <> 'unreferenced_artifact')
                + (SELECT count(*) FROM kvg.knowledge k
                    WHERE NOT EXISTS (SELECT FROM kvg.artifacts a WHERE a.sha256 = k.artifact_sha256)
                       OR NOT EXISTS (SELECT FROM kvg.audit u WHERE u.operation = 'learn' AND u.knowledge_id = k.id))
                + (SELECT count(*) FROM kvg.audit u WHERE u.operation = 'learn'
                    AND pg_xact_status(u.caller_xid) IS DISTINCT FROM 'aborted'
                    AND NOT EXISTS (SELECT FROM kvg.knowledge k WHERE k.id = u.knowledge_id))
                + (CASE WHEN (kvg_audit_verify()).ok THEN 0 ELSE 1 END)" 2>&1)
  if [ "$bad" = 0 ]; then
    echo "  after $what: $found: ok"
  else
    echo "  after $what: $found: FAILED ($bad problems)"
    failures=$((failures + 1))
  fi
}

# Starts `sql` in a background psql, waits `delay` seconds, SIGKILLs its
# backend, and says what it killed.
kill_during() {
  local label=$1 delay=$2 sql=$3
  psql -X -At -c "SET application_name = 'kvg-crash-victim'" -c "$sql" >/dev/null 2>&1 &
  local client=$!
  sleep "$delay"
  local victim
  victim=$(q "SELECT pid || ' running ' || left(query, 60) FROM pg_stat_activity
              WHERE application_name = 'kvg-crash-victim' AND state = 'active'" 2>/dev/null)
  if [ -z "$victim" ]; then
    echo "  $label: nothing running to kill (finished too early?)"; failures=$((failures + 1))
  else
    kill -9 "${victim%% *}"
    echo "  killed backend $victim ($label)"
  fi
  wait "$client" 2>/dev/null
  check "$label"
}

echo "crash test: cluster on port $port, model $model"
check "setup"
kill_during "captures (large-object writes)" 1.5 \
  "SELECT count(kvg_capture(repeat('Once upon a time there was a girl. ', 20) || i)) FROM generate_series(1, 1000000) i"
kill_during "kvg_learn of new questions" 1.5 \
  "SELECT count(kvg_learn('What is thing ' || i || '?', 'contains', 'Thing ' || i || ' is red.', 'red')) FROM generate_series(1, 1000000) i"
kill_during "audited answers" 1.5 \
  "SELECT count(kvg_answer('What color is the sky?')) FROM generate_series(1, 1000000)"
kill_during "a transaction of captures, learns and answers" 1.5 \
  "BEGIN; SELECT kvg_capture('Lily had a red ball'); SELECT kvg_learn('Who had a ball?', 'contains', 'Lily had a red ball.', 'Lily');
   SELECT count(kvg_answer('Who had a ball?')) FROM generate_series(1, 1000000)"

# The audit writer SIGKILLed while 4 sessions append (each answer its own
# statement): the server restarts (a killed process may have left shared
# memory inconsistent), the postmaster starts kvg's reserved workers again
# (docs/operations.md, "Worker slots"), the next call is answered by a
# writer started again, and every answer a client received has its
# committed row.
writer_db=$(q "SELECT oid FROM pg_database WHERE datname = 'crash'")
for i in 1 2 3 4; do
  (for j in $(seq 1 300); do
     q "SELECT audit_id FROM kvg_answer_detail('What color is the sky?')" >>"$dir/returned.$i" 2>/dev/null || break
   done) &
done
sleep 2
writer=$(q "SELECT pid FROM kvg_audit_writers() WHERE database = $writer_db AND lane = 'rows'")
if [ -z "$writer" ]; then
  echo "  FAILED: no audit writer to kill"; failures=$((failures + 1))
else
  kill -9 "$writer"
  echo "  killed the audit writer (pid $writer) during appends by 4 sessions"
fi
wait
wait_ready
next=$(q "SELECT audit_id FROM kvg_answer_detail('What color is the sky?')" 2>&1)
restarted=$(q "SELECT pid FROM kvg_audit_writers() WHERE database = $writer_db AND lane = 'rows' AND state = 'running'" 2>/dev/null)
if [[ "$next" =~ ^[0-9]+$ ]] && [ -n "$restarted" ] && [ "$restarted" != "$writer" ]; then
  echo "  after the restart the next call is answered and audited (row $next) by a writer started again (pid $restarted)"
else
  echo "  FAILED: after the restart the next call said: $next (writer: ${restarted:-none})"; failures=$((failures + 1))
fi
returned=$(cat "$dir"/returned.* 2>/dev/null | grep -c '^[0-9]')
missing=$(cat "$dir"/returned.* 2>/dev/null | grep '^[0-9]' | paste -sd, - |
  xargs -I{} psql -X -At -c "SELECT count(*) FROM unnest('{{}}'::bigint[]) r(id) WHERE NOT EXISTS (SELECT FROM kvg.audit a WHERE a.id = r.id)")
echo "  $returned answers were returned; ${missing:-?} of them have no committed row"
if [ "$returned" -lt 1 ] || [ "${missing:-1}" != 0 ]; then failures=$((failures + 1)); fi
check "the audit writer killed"

# A delivered answer's caller committed, even when the server crashes the
# moment the client has it: its commit was flushed (it wrote nothing else,
# so PostgreSQL alone would have committed it asynchronously).
lost=0
for i in 1 2 3; do
  # A backend to kill (any process of the server's makes it restart), ready
  # before the call, so the kill follows the answer at once.
  psql -X -At -c "SET application_name = 'kvg-crash-sleeper'" -c "SELECT pg_sleep(600)" >/dev/null 2>&1 &
  sleeper_client=$!
  sleeper=""
  for _ in $(seq 1 40); do
    sleeper=$(q "SELECT pid FROM pg_stat_activity WHERE application_name = 'kvg-crash-sleeper' AND state = 'active'")
    [ -n "$sleeper" ] && break
    sleep 0.05
  done
  q "SELECT kvg_generate('xid probe $i', 4)" >/dev/null || lost=$((lost + 1))
  kill -9 "$sleeper"
  wait "$sleeper_client" 2>/dev/null
  wait_ready || break
  status=$(q "SELECT pg_xact_status(caller_xid) FROM kvg.audit WHERE operation = 'generate' ORDER BY id DESC LIMIT 1")
  [ "$status" = committed ] || lost=$((lost + 1))
done
if [ "$lost" = 0 ]; then
  echo "  3 answers delivered, the server crashed at once after each: their callers read committed: ok"
else
  echo "  FAILED: of 3 answers delivered right before a crash, $lost read otherwise than committed"
  failures=$((failures + 1))
fi
check "crashes right after delivered answers"

# Immediate shutdown during a batch of answers, each its own transaction.
for i in 1 2 3 4; do
  (for j in $(seq 1 200); do q "SELECT kvg_answer('What color is the sky?')" >/dev/null 2>&1 || break; done) &
done
sleep 2
committed=$(q "SELECT count(*) FROM kvg.audit WHERE operation = 'answer'")
ctl stop -m immediate
echo "  pg_ctl stop -m immediate during 4 sessions of answers ($committed answers committed when it was sent)"
wait
ctl start || { tail -20 "$dir/server.log"; exit 1; }
check "immediate shutdown"
after=$(q "SELECT count(*) FROM kvg.audit WHERE operation = 'answer'")
if [ "$after" -lt "$committed" ]; then
  echo "  FAILED: $committed answers were committed before the shutdown, $after after"
  failures=$((failures + 1))
fi

if [ "$failures" -gt 0 ]; then
  echo "crash test: $failures FAILED"
  exit 1
fi
echo "crash test: every check passed"
