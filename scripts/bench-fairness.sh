#!/usr/bin/env bash
# Sharing the engine worker between roles (docs/engine-worker.md, "Sharing
# the worker"): one role ("crowd") keeps HEAVY sessions busy with long
# prompts and long generations; another ("alice") asks short generations one
# after another. Prints alice's latency (median, p95, max, over CALLS calls,
# timed in the server) alone, then under the crowd for each value of
# kvg.engine_pass_tokens given (0: no bound, every waiting prefill chunk in
# every pass, as the worker ran before it had a budget), with the ratio of
# each p95 to alice's p95 alone and the crowd's throughput meanwhile (the
# prompt and decoded tokens of its audited calls per second), in one run.
#
#   scripts/bench-fairness.sh MODEL [PASS_TOKENS...]   (default 0 512 128)
#
# MODEL is a path the server reads (a synthetic one: kvg synth --seed 3
# --n-embd 768 --n-layer 6 --n-head 12 --vocab 512 --n-ctx 1024). Environment:
# KVG_BENCH_HEAVY (crowd sessions, default 8), KVG_BENCH_PROMPT (their prompt,
# in repetitions of a sentence, default 30: 570 tokens with that model),
# KVG_BENCH_TOKENS (their generations, default 64), KVG_BENCH_CALLS (alice's
# calls, default 20, of 16 tokens), KVG_BENCH_DB (default kvg_bench_fair),
# PGHOST/PGPORT/PGUSER: a superuser on a cluster where kvg is preloaded and
# the two roles may log in without a password (scripts/pg-cluster.sh's).
set -euo pipefail
model=${1:?usage: bench-fairness.sh MODEL [PASS_TOKENS...]}
shift
budgets=("$@")
[ ${#budgets[@]} -gt 0 ] || budgets=(0 512 128)
heavy=${KVG_BENCH_HEAVY:-8}
repeat=${KVG_BENCH_PROMPT:-30}
tokens=${KVG_BENCH_TOKENS:-64}
calls=${KVG_BENCH_CALLS:-20}
db=${KVG_BENCH_DB:-kvg_bench_fair}
dir=$(mktemp -d /tmp/kvg-bench-fair.XXXXXX)
chmod 755 "$dir"
crowd_pid=""
cleanup() {
  [ -n "$crowd_pid" ] && kill "$crowd_pid" 2>/dev/null
  psql -X -q -d postgres -c "ALTER SYSTEM RESET kvg.engine_pass_tokens" -c "SELECT pg_reload_conf()" >/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

export PGOPTIONS="-c client_min_messages=warning"
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
psql -X -q -d "$db" -c "CREATE EXTENSION kvg" >/dev/null
for role in kvg_bench_crowd kvg_bench_alice; do
  psql -X -q -d postgres -c "DROP ROLE IF EXISTS $role" -c "CREATE ROLE $role LOGIN IN ROLE kvg_user" \
    -c "ALTER ROLE $role SET kvg.model = '$model'" -c "ALTER ROLE $role SET kvg.device = 'cpu'" >/dev/null
done
prompt="repeat('The cat sat on the warm mat. ', $repeat)"
prompt_tokens=$(PGOPTIONS="-c kvg.model=$model" psql -X -At -d "$db" -c "SELECT cardinality(kvg_tokenize($prompt))")
cat >"$dir/crowd.sql" <<SQL
SELECT kvg_generate(:client_id || ' ' || $prompt, $tokens);
SQL
chmod 644 "$dir/crowd.sql"

# alice's latencies in ms (median p95 max), timed in her backend.
alice() {
  psql -X -q -At -U kvg_bench_alice -d "$db" -v ON_ERROR_STOP=1 <<SQL
CREATE TEMP TABLE took (ms double precision);
DO \$\$
DECLARE t0 timestamptz;
BEGIN
  FOR i IN 1..$calls LOOP
    t0 := clock_timestamp();
    PERFORM kvg_generate('Alice asks question ' || i || ':', 16);
    INSERT INTO took VALUES (extract(epoch FROM clock_timestamp() - t0) * 1000);
  END LOOP;
END \$\$;
SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 1) || ' ' ||
       round(percentile_cont(0.95) WITHIN GROUP (ORDER BY ms)::numeric, 1) || ' ' || round(max(ms)::numeric, 1)
FROM took;
SQL
}

set_budget() {
  psql -X -q -d postgres -c "ALTER SYSTEM SET kvg.engine_pass_tokens = $1" -c "SELECT pg_reload_conf()" >/dev/null
  sleep 1.2  # the worker reads it at its next round
}

alice >/dev/null  # warm-up: the model mapped, the worker started
read -r alone_p50 alone_p95 alone_max < <(alice)
rows=()
for budget in "${budgets[@]}"; do
  set_budget "$budget"
  before=$(psql -X -At -d "$db" -c "SELECT coalesce(max(id), 0) FROM kvg.audit")
  began=$(date +%s.%N)
  pgbench -n -U kvg_bench_crowd -c "$heavy" -j "$heavy" -T 3600 -f "$dir/crowd.sql" "$db" >"$dir/pgbench.$budget" 2>&1 &
  crowd_pid=$!
  sleep 5  # the crowd's prompts fill the worker
  read -r p50 p95 max < <(alice)
  kill "$crowd_pid" 2>/dev/null || { echo "the crowd stopped early:" >&2; grep -m3 error "$dir/pgbench.$budget" >&2; exit 1; }
  ended=$(date +%s.%N)
  wait "$crowd_pid" 2>/dev/null || true
  crowd_pid=""
  sleep 2  # the crowd's calls in flight end
  # The crowd's throughput while alice asked: prompt and decoded tokens of its audited calls.
  crowd=$(psql -X -At -d "$db" -c "SELECT coalesce(sum(tokens_in + tokens_out), 0) FROM kvg.audit
                                    WHERE id > $before AND role = 'kvg_bench_crowd'")
  rows+=("$budget $p50 $p95 $max $(python3 -c "import sys; print(round(int(sys.argv[1]) / (float(sys.argv[3]) - float(sys.argv[2]))))" "$crowd" "$began" "$ended")")
done

echo "alice: $calls calls of 16 tokens; crowd: $heavy sessions of $prompt_tokens-token prompts and $tokens-token" \
  "generations; $(basename "$model"), $(nproc) cores"
printf '| %-28s | %9s | %9s | %9s | %-12s | %s\n' "kvg.engine_pass_tokens" "p50 ms" "p95 ms" "max ms" \
  "p95 vs alone" "crowd tokens/s"
printf '| %-28s | %9s | %9s | %9s | %-12s | %s\n' "alice alone" "$alone_p50" "$alone_p95" "$alone_max" "1.0x" "-"
for row in "${rows[@]}"; do
  read -r budget p50 p95 max crowd_rate <<<"$row"
  printf '| %-28s | %9s | %9s | %9s | %-12s | %s\n' "$budget, under the crowd" "$p50" "$p95" "$max" \
    "$(python3 -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.1f}x')" "$p95" "$alone_p95")" \
    "$crowd_rate"
done
