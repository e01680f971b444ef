-- What the isolation of #37 costs a legitimate call, median and p95 of n,
-- as a kvg_author (so also a kvg_user): an access check (kvg_artifact_verify
-- and kvg_export of its own artifact), an answer whose entry has a function
-- verifier (frozen, run in a pooled verifier worker), a capture (a new
-- artifact: stored by the artifacts writer, audited). Runs unchanged on the
-- kvg of before #37 (5676b9c), for the before/after table:
--   source scripts/pg-env.sh; createdb kvg_bench_cost; psql -d kvg_bench_cost -c 'CREATE EXTENSION kvg'
--   psql -X -q -d kvg_bench_cost -v n=100 -v model=$pg_files/models/stories260K.gguf -f scripts/bench-isolation-cost.sql
\set ON_ERROR_STOP on
SET client_min_messages = warning;
DROP ROLE IF EXISTS bench_author;
CREATE ROLE bench_author IN ROLE kvg_author;
CREATE FUNCTION public.bench_has_words(q text, a text) RETURNS boolean LANGUAGE sql RETURN a ~ '[[:alnum:]]';
SET kvg.model = :'model';
SET kvg.device = cpu;
CREATE TEMP TABLE timings (what text, ms float8);
GRANT ALL ON timings TO PUBLIC;
SET SESSION AUTHORIZATION bench_author;
SELECT kvg_capture('Once upon a time there was a little girl who loved the sea.') AS own \gset
SELECT kvg_learn('Where did the red ball roll?', 'public.bench_has_words', 'The red ball rolled under the bed.', 'bed')
\g /dev/null
CREATE FUNCTION pg_temp.time_it(what text, stmt text, n integer) RETURNS void LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz;
BEGIN
  FOR i IN 1..n LOOP
    t0 := clock_timestamp();
    EXECUTE replace(stmt, '#i', i::text);
    INSERT INTO pg_temp.timings VALUES (what, extract(epoch FROM clock_timestamp() - t0) * 1000);
  END LOOP;
END $$;
SELECT pg_temp.time_it('access: kvg_artifact_verify(own)', format('SELECT kvg_artifact_verify(%L)', :'own'), :n);
SELECT pg_temp.time_it('access: kvg_export(own)', format('SELECT kvg_export(%L)', :'own'), :n);
SELECT pg_temp.time_it('answer, function verifier, 4 tokens',
                       $$SELECT verified FROM kvg_answer_detail('Where did the red ball roll?', 4)$$, :n);
SELECT pg_temp.time_it('capture (a new artifact)', $$SELECT kvg_capture('Capture number #i of the bench.')$$, :n);
RESET SESSION AUTHORIZATION;
SELECT what, count(*) AS runs,
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 2) AS median_ms,
       round(percentile_cont(0.95) WITHIN GROUP (ORDER BY ms)::numeric, 2) AS p95_ms
FROM timings GROUP BY what ORDER BY what;
DROP FUNCTION public.bench_has_words(text, text);
