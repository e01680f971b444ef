-- Measures the library as it stands (issue #14): storage, learn time per
-- entry (public.library_learn_times, written by fill.sql), routing
-- latency (recurring: by question key; transfer: by lexemes), kvg_answer
-- latency, and EXPLAIN of both routing queries.
--   psql -v samples=200 -v answers=50 -v probe_seed=1 -f scripts/library/measure.sql   (after fill.sql)
\set ON_ERROR_STOP on
SET search_path = kvg, public;
\pset footer off

-- Statistics for the planner and for kvg.related_knowledge's choice of probes.
ANALYZE kvg.knowledge;

\echo '== library'
SELECT (SELECT count(*) FROM knowledge) AS entries,
       (SELECT count(DISTINCT solution) FROM knowledge) AS distinct_solutions,
       (SELECT count(*) FROM artifacts) AS artifacts,
       (SELECT count(*) FROM artifacts WHERE parent_sha256 IS NULL) AS root_links,
       (SELECT count(*) FROM artifacts WHERE parent_sha256 IS NOT NULL) AS question_links;

\echo '== storage (shared prefixes: one root link per distinct solution, whatever the questions)'
WITH s AS (
  SELECT (SELECT sum(bytes) FROM artifacts) AS artifact_bytes,
         (SELECT sum(bytes) FROM artifacts WHERE parent_sha256 IS NULL) AS root_bytes,
         (SELECT sum(bytes) FROM artifacts WHERE parent_sha256 IS NOT NULL) AS link_bytes,
         pg_total_relation_size('pg_largeobject') AS lo_total,
         pg_relation_size('kvg.knowledge') + pg_relation_size(coalesce(
           (SELECT reltoastrelid FROM pg_class WHERE oid = 'kvg.knowledge'::regclass), 0)) AS knowledge_table,
         pg_indexes_size('kvg.knowledge') AS knowledge_indexes,
         pg_relation_size('kvg.artifacts') AS artifacts_table,
         pg_indexes_size('kvg.artifacts') AS artifacts_indexes,
         pg_total_relation_size('kvg.audit') AS audit_total,
         (SELECT count(*) FROM knowledge) AS n)
SELECT pg_size_pretty(artifact_bytes) AS artifact_bytes, pg_size_pretty(root_bytes) AS in_root_links,
       pg_size_pretty(link_bytes) AS in_question_links, pg_size_pretty(lo_total) AS pg_largeobject,
       pg_size_pretty(knowledge_table) AS knowledge_table, pg_size_pretty(knowledge_indexes) AS knowledge_indexes,
       pg_size_pretty(artifacts_table) AS artifacts_table, pg_size_pretty(artifacts_indexes) AS artifacts_indexes,
       pg_size_pretty(audit_total) AS audit,
       pg_size_pretty((lo_total + knowledge_table + knowledge_indexes + artifacts_table + artifacts_indexes) / n)
         AS per_entry
FROM s;

\echo '== learn time per entry, ms'
SELECT count(*) AS learned, round(avg(micros) / 1e3, 2) AS mean_ms,
       round((percentile_cont(0.5) WITHIN GROUP (ORDER BY micros) / 1e3)::numeric, 2) AS p50_ms,
       round((percentile_cont(0.99) WITHIN GROUP (ORDER BY micros) / 1e3)::numeric, 2) AS p99_ms,
       round((avg(micros) FILTER (WHERE question NOT LIKE '%to the') / 1e3)::numeric, 2) AS first_of_story_ms,
       round((avg(micros) FILTER (WHERE question LIKE '%to the') / 1e3)::numeric, 2) AS second_of_story_ms
FROM public.library_learn_times;

-- Latency of one statement per argument, timed in the server (no client
-- round trip): calls, p50 and p99 in milliseconds. With warm_up, one untimed
-- call first: the session's first call of a function compiles it and reads
-- the catalogs (≈ 4 ms, the same at every size), which is not routing's cost.
-- kvg_answer is not warmed up: its first call (model mapped, first graft) is
-- part of what an answer costs in a fresh session.
CREATE OR REPLACE FUNCTION pg_temp.latency(label text, statement text, args text[], warm_up boolean DEFAULT false)
RETURNS TABLE (measured text, calls bigint, p50_ms numeric, p99_ms numeric) LANGUAGE plpgsql AS $$
DECLARE
  arg text;
  t0 timestamptz;
  us bigint[] := '{}';
BEGIN
  IF warm_up THEN EXECUTE statement USING args[1]; END IF;
  FOREACH arg IN ARRAY args LOOP
    t0 := clock_timestamp();
    EXECUTE statement USING arg;
    us := us || (extract(epoch FROM clock_timestamp() - t0) * 1e6)::bigint;
  END LOOP;
  RETURN QUERY
    SELECT label, count(*),
           round((percentile_cont(0.5) WITHIN GROUP (ORDER BY u) / 1e3)::numeric, 3),
           round((percentile_cont(0.99) WITHIN GROUP (ORDER BY u) / 1e3)::numeric, 3)
    FROM unnest(us) u;
END $$;

-- Questions of random entries (recurring), and related ones not in the
-- library (transfer): a story's character and thing in another sentence.
DROP TABLE IF EXISTS probe;
CREATE TEMP TABLE probe AS
SELECT question AS recurring,
       split_part(question, ' ', 1) || ' ' || split_part(question, ' ', 2) || ' went home with the ' ||
         (regexp_match(solution, 'had a \w+ (\w+)'))[1] AS transfer
FROM knowledge ORDER BY md5(id::text || :'probe_seed') LIMIT :samples;

-- The plain query, every lexeme of the question a probe, to compare (kvg.related_knowledge probes
-- the rarest lexemes only).
CREATE OR REPLACE FUNCTION pg_temp.related_knowledge_plain(question text, min_similarity double precision, max_entries integer)
RETURNS TABLE (id bigint, similarity double precision) LANGUAGE sql STABLE AS $$
  WITH q AS (SELECT tsvector_to_array(to_tsvector('english'::regconfig, question)) AS lexemes)
  SELECT k.id, s.similarity
  FROM q, kvg.knowledge k,
       LATERAL (SELECT cardinality(ARRAY(SELECT unnest(q.lexemes) INTERSECT SELECT unnest(k.lexemes)))::float8
                       / cardinality(q.lexemes) AS similarity) s
  WHERE cardinality(q.lexemes) > 0 AND k.lexemes && q.lexemes AND s.similarity >= min_similarity
  ORDER BY s.similarity DESC, k.id
  LIMIT max_entries
$$;
SELECT count(*) FILTER (WHERE a IS DISTINCT FROM b) AS routes_differing_from_plain
FROM (SELECT (SELECT array_agg(id) FROM kvg.related_knowledge(transfer, 0.5, 2)) AS a,
             (SELECT array_agg(id) FROM pg_temp.related_knowledge_plain(transfer, 0.5, 2)) AS b FROM probe) t;

\echo '== routing and answer latency (server-side, per call)'
SELECT array_agg(recurring) AS recurring_list, array_agg(transfer) AS transfer_list FROM probe \gset
SELECT * FROM pg_temp.latency('route recurring (by key)',
  'SELECT id FROM kvg.knowledge WHERE question_key = kvg.question_key($1)', :'recurring_list', true)
UNION ALL
SELECT * FROM pg_temp.latency('route transfer (by lexemes)',
  'SELECT count(*) FROM kvg.related_knowledge($1, 0.5, 2)', :'transfer_list', true)
UNION ALL
SELECT * FROM pg_temp.latency('route transfer, plain query',
  'SELECT count(*) FROM pg_temp.related_knowledge_plain($1, 0.5, 2)', :'transfer_list', true)
UNION ALL
SELECT * FROM pg_temp.latency('kvg_answer recurring, 8 tokens', 'SELECT kvg_answer($1, 8)',
  (:'recurring_list'::text[])[1:(:answers)])
UNION ALL
SELECT * FROM pg_temp.latency('kvg_answer transfer, 8 tokens', 'SELECT kvg_answer($1, 8)',
  (:'transfer_list'::text[])[1:(:answers)]);

\echo '== EXPLAIN: the plans routing really runs (auto_explain, nested statements, shown to this client)'
SELECT recurring AS q1, transfer AS q2 FROM probe LIMIT 1 \gset
LOAD 'auto_explain';
SET auto_explain.log_min_duration = 0;
SET auto_explain.log_nested_statements = on;
SET auto_explain.log_analyze = off;
SET client_min_messages = log;
\echo '-- recurring: the key lookup kvg_answer runs (extension/src/knowledge/knowledge_library.cpp)'
SELECT id FROM kvg.knowledge k WHERE k.question_key = kvg.question_key(:'q1');
\echo '-- transfer: kvg.related_knowledge'
SELECT * FROM kvg.related_knowledge(:'q2', 0.5, 2);
RESET client_min_messages;
RESET auto_explain.log_min_duration;
