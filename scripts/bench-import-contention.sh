#!/usr/bin/env bash
# What one user's large import costs other users' audited calls
# (docs/audit-chain.md: a database's writers, one per lane). Prints the
# median and p95 of N 4-token generations (kvg_generate: an audited call,
# stories260K; 50 ms apart) alone, then while another session imports a
# ~150 MB artifact again and again (each import writes its 150 MB large
# object: the artifact is deleted between imports), and the ratio of the
# p95s.
#   KVG_PGPORT=... scripts/bench-import-contention.sh [N]     (default 100)
# Uses the private cluster (scripts/pg-cluster.sh start) and a database of
# its own, dropped at the end. The large artifact is the KV of ~2,300 tokens
# of a synthetic 64-layer model (64 KiB of f32 KV a token), captured once.
set -euo pipefail
source "$(dirname "$0")/pg-env.sh"
n=${1:-100}
db=kvg_bench_import
small=$(stage_for_server "${KVG_TEST_DATA:-$repo/tests/data}/models/stories260K.gguf" models)
work=$pg_files/bench-import
mkdir -p "$work"
"$repo/${KVG_BUILD_DIR:-build}/cli/kvg" synth --out "$work/deep.gguf" --n-embd 128 --n-ff 128 --n-layer 64 \
  --n-head 4 --vocab 300 --n-ctx 4096 --seed 7 >/dev/null
server_readable "$work"
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
loader=
trap '[ -n "$loader" ] && kill $loader 2>/dev/null; q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"; rm -rf "$work"' EXIT
q -d "$db" -c "CREATE EXTENSION kvg"
# ~2,300 tokens of the deep model: its artifact is ~150 MB.
big=$(PGOPTIONS="-c kvg.model=$work/deep.gguf -c kvg.device=cpu" q -d "$db" \
  -c "SELECT kvg_capture(string_agg(chr(97 + (i * 7) % 26) || ' ', '') ) FROM generate_series(1, 1150) i")
q -d "$db" -c "SELECT pg_catalog.lo_export(loid, '$work/big.kvga') FROM kvg.artifacts WHERE sha256 = '$big'" >/dev/null
bytes=$(q -d "$db" -c "SELECT bytes FROM kvg.artifacts WHERE sha256 = '$big'")
q -d "$db" -c "SELECT kvg_artifact_delete('$big')" >/dev/null

measure() {  # measure LABEL: N timed 4-token generations, into table timing
  q -d "$db" <<SQL
SET kvg.model = '$small';
SET kvg.device = cpu;
CREATE TABLE IF NOT EXISTS timing (label text, ms float8);
DO \$\$
DECLARE
  t timestamptz;
BEGIN
  FOR i IN 1..$n LOOP
    t := clock_timestamp();
    PERFORM kvg_generate('Once upon a time #' || i, 4);
    INSERT INTO timing VALUES ('$1', extract(epoch FROM clock_timestamp() - t) * 1000);
    PERFORM pg_sleep(0.05);
  END LOOP;
END
\$\$;
SQL
}
measure alone
# The loader: import, delete, again, until stopped.
(while q -d "$db" -c "SELECT kvg_artifact_delete(kvg_import(pg_read_binary_file('$work/big.kvga'), verify => false))" \
     >/dev/null 2>&1; do :; done) &
loader=$!
sleep 3  # its first import under way
measure during_import
kill $loader; loader=
imports=$(q -d "$db" -c "SELECT count(*) FROM kvg.audit WHERE operation = 'import'")
q -d "$db" -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
               WHERE datname = current_database() AND query LIKE '%kvg_import%' AND pid <> pg_backend_pid()" >/dev/null
q -d "$db" <<SQL
SELECT format('%s-byte artifact, imported %s times meanwhile; %s 4-token generations each', $bytes, $imports, $n);
SELECT format('%-14s median %7s ms   p95 %7s ms   max %8s ms', label,
              round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 2),
              round(percentile_cont(0.95) WITHIN GROUP (ORDER BY ms)::numeric, 2), round(max(ms)::numeric, 2))
FROM timing GROUP BY label ORDER BY label;
SELECT format('p95 during the imports / p95 alone: %s', round((
  (SELECT percentile_cont(0.95) WITHIN GROUP (ORDER BY ms) FROM timing WHERE label = 'during_import') /
  (SELECT percentile_cont(0.95) WITHIN GROUP (ORDER BY ms) FROM timing WHERE label = 'alone'))::numeric, 2));
SQL
