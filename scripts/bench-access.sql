-- What the isolation of #37 costs a legitimate kvg_user's call: kvg_export
-- (now audited), kvg_artifact_verify and a 1-token kvg_generate of its own
-- artifact (each with the access check), and the function-backed views.
--   source scripts/pg-env.sh; createdb kvg_bench_access; psql -d kvg_bench_access -c 'CREATE EXTENSION kvg'
--   psql -X -q -d kvg_bench_access -v n=100 -v model=$pg_files/models/stories260K.gguf -f scripts/bench-access.sql
\set ON_ERROR_STOP on
SET client_min_messages = warning;
DROP ROLE IF EXISTS bench_alice;
CREATE ROLE bench_alice IN ROLE kvg_user;
SET kvg.model = :'model';
SET kvg.device = cpu;
CREATE TEMP TABLE timings (what text, ms float8);
GRANT ALL ON timings TO PUBLIC;
SET SESSION AUTHORIZATION bench_alice;
SELECT kvg_capture('Once upon a time there was a little girl who loved the sea.') AS own \gset
CREATE FUNCTION pg_temp.time_it(what text, stmt text, n integer) RETURNS void LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz;
BEGIN
  FOR i IN 1..n LOOP
    t0 := clock_timestamp();
    EXECUTE stmt;
    INSERT INTO pg_temp.timings VALUES (what, extract(epoch FROM clock_timestamp() - t0) * 1000);
  END LOOP;
END $$;
SELECT pg_temp.time_it('kvg_artifact_verify(own)', format('SELECT kvg_artifact_verify(%L)', :'own'), :n);
SELECT pg_temp.time_it('kvg_export(own)', format('SELECT kvg_export(%L)', :'own'), :n);
SELECT pg_temp.time_it('kvg_generate(own artifact, 1 token)', format('SELECT kvg_generate(%L, 1, %L)', ' She', :'own'), :n);
SELECT pg_temp.time_it('count(*) FROM kvg.readable_artifacts', 'SELECT count(*) FROM kvg.readable_artifacts', :n);
SELECT pg_temp.time_it('count(*) FROM kvg.readable_audit', 'SELECT count(*) FROM kvg.readable_audit', :n);
RESET SESSION AUTHORIZATION;
SELECT (SELECT count(*) FROM kvg.artifacts) AS artifacts_stored, (SELECT count(*) FROM kvg.audit) AS audit_rows;
SELECT what, count(*) AS runs,
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 3) AS median_ms,
       round(percentile_cont(0.95) WITHIN GROUP (ORDER BY ms)::numeric, 3) AS p95_ms
FROM timings GROUP BY what ORDER BY what;
