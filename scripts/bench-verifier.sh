#!/usr/bin/env bash
# What running a function verifier in a worker of its own costs an answer
# (docs/security.md, promise 8): the median of N recurring answers whose
# entry has a function verifier (a background worker per verification),
# minus the median of N whose entry has the built-in `contains` (checked in
# the asker's backend), same model, same prompt shape, same token count.
#   KVG_PGPORT=... scripts/bench-verifier.sh [N]     (default 100)
# Uses the private cluster (scripts/pg-cluster.sh start) and a database of
# its own, dropped at the end.
set -euo pipefail
source "$(dirname "$0")/pg-env.sh"
n=${1:-100}
db=kvg_bench_verifier
model=$(stage_for_server "${KVG_TEST_DATA:-$repo/tests/data}/models/stories260K.gguf" models)
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
q -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
trap 'q -d postgres -c "DROP DATABASE IF EXISTS $db"' EXIT
q -d "$db" -c "CREATE EXTENSION kvg" -c "CREATE SCHEMA bench" \
  -c "CREATE FUNCTION bench.has_words(q text, a text) RETURNS boolean LANGUAGE sql RETURN a ~ '[[:alnum:]]'"
q -d "$db" <<SQL
SET kvg.model = '$model';
SET kvg.device = cpu;
SELECT kvg_learn('Where did the red ball roll?', 'bench.has_words', 'The red ball rolled under the bed.', 'bed');
SELECT kvg_learn('Where did the blue cup fall?', 'contains', 'The blue cup fell under the bed.', 'bed');
CREATE TABLE timing (verifier text, ms float8, verified boolean);
DO \$\$
DECLARE
  t timestamptz;
  v boolean;
BEGIN
  FOR i IN 1..$n LOOP
    t := clock_timestamp();
    SELECT verified INTO v FROM kvg_answer_detail('Where did the red ball roll?', 4);
    INSERT INTO timing VALUES ('function', extract(epoch FROM clock_timestamp() - t) * 1000, v);
    t := clock_timestamp();
    SELECT verified INTO v FROM kvg_answer_detail('Where did the blue cup fall?', 4);
    INSERT INTO timing VALUES ('contains', extract(epoch FROM clock_timestamp() - t) * 1000, v);
  END LOOP;
END
\$\$;
SELECT format('%s answers each: median %s ms with the function verifier (all verified: %s), %s ms with contains; '
              || 'the worker costs %s ms per verification (median difference)', $n,
              round(f.m::numeric, 2), f.all_ok, round(c.m::numeric, 2), round((f.m - c.m)::numeric, 2))
FROM (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS m, bool_and(verified) AS all_ok
      FROM timing WHERE verifier = 'function') f,
     (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS m FROM timing WHERE verifier = 'contains') c;
SQL
