-- One name per concept (docs/sql.md, "Rules every function follows"): the
-- artifact argument is called artifact everywhere, max_tokens defaults to 32
-- everywhere, times in results are _ms double precision, kvg_learn and
-- kvg_solve take the question then the verifier, verify functions have one
-- shape, statistics are views whose figures are never negative, tokens are
-- counted grafted + prefilled = the prompt, and kvg.threads 0 (its default)
-- is kvg.max_threads.
BEGIN;
SELECT plan(15);
CREATE FUNCTION pg_temp.plan_of(query text) RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN RETURN QUERY EXECUTE 'EXPLAIN ' || query; END $$;
\getenv data KVG_TEST_DATA
SELECT set_config('kvg.model', :'data' || '/models/stories260K.gguf', true) \g /dev/null
SET LOCAL kvg.device = 'cpu';

CREATE TEMP VIEW api AS
  SELECT p.proname::text AS name, a.name AS arg, a.mode, a.type, a.n,
         pg_get_function_arguments(p.oid) AS signature
  FROM pg_proc p
  CROSS JOIN LATERAL unnest(coalesce(p.proargnames, ARRAY[]::text[]),
                            coalesce(p.proargmodes::text[], array_fill('i'::text, ARRAY[p.pronargs])),
                            coalesce(p.proallargtypes, p.proargtypes::oid[]::oid[]))
                     WITH ORDINALITY AS a(name, mode, type, n)
  WHERE p.pronamespace = 'public'::regnamespace AND p.proname LIKE 'kvg\_%';

SELECT is(ARRAY(SELECT DISTINCT name || '(' || arg || ')' FROM api
                WHERE mode = 'i' AND arg IN ('sha256', 'parent', 'blocks', 'leaf', 'chain') ORDER BY 1),
          ARRAY[]::text[], 'no argument names an artifact other than artifact / artifacts');
SELECT is(ARRAY(SELECT DISTINCT name FROM api
                WHERE mode = 'i' AND arg = 'max_tokens' AND signature NOT LIKE '%max_tokens integer DEFAULT 32%'
                ORDER BY 1),
          ARRAY[]::text[], 'max_tokens defaults to 32 in every function that has it');
SELECT cmp_ok((SELECT count(DISTINCT name) FROM api WHERE arg = 'max_tokens'), '>=', 7::bigint,
              'and that is every generating function');
SELECT is(ARRAY(SELECT DISTINCT name || '.' || arg FROM api
                WHERE mode = 't' AND (arg ~ '_(us|s|seconds)$' OR (arg LIKE '%\_ms' AND type <> 'float8'::regtype))
                ORDER BY 1),
          ARRAY[]::text[], 'times in results are _ms double precision');
SELECT is(ARRAY(SELECT arg FROM api WHERE name = 'kvg_learn' AND n <= 2 ORDER BY n)
          || ARRAY(SELECT arg FROM api WHERE name = 'kvg_solve' AND n <= 2 ORDER BY n),
          ARRAY['question', 'verifier', 'question', 'verifier'], 'kvg_learn and kvg_solve: question, then verifier');
SELECT is(ARRAY(SELECT name || ':' || string_agg(arg, ',' ORDER BY n) FROM api
                WHERE name IN ('kvg_artifact_verify', 'kvg_audit_verify') AND mode = 'o' GROUP BY name ORDER BY name),
          ARRAY['kvg_artifact_verify:ok,first_bad,reason', 'kvg_audit_verify:ok,first_bad,reason'],
          'the verify functions have one shape');
SELECT is(ARRAY(SELECT name FROM api WHERE name LIKE '%stats%' GROUP BY name), ARRAY[]::text[],
          'statistics are views, not functions');

-- Figures that cannot be negative are not: a first recurring answer grafts
-- an artifact read from its large object, slower than recomputing it on
-- this tiny model, and kvg.stats still shows two non-negative times.
SET LOCAL kvg.artifact_cache_memory = 0;
SELECT kvg_learn('What colour was Ada''s cup?', 'contains', 'Ada had a green cup. Ada drank from her green cup.', 'green')
  \g /dev/null
SELECT * FROM kvg_answer_detail('What colour was Ada''s cup?', 4) \gset d_
SELECT is(:'d_mode'::text, 'recurring', 'a recurring answer');
SELECT is(:d_tokens_prefilled, 1, 'its whole prompt is grafted but for the last token, computed for its logits');
SELECT is((SELECT tokens_in FROM kvg.audit WHERE id = :d_audit_id), :d_tokens_grafted + :d_tokens_prefilled,
          'grafted + prefilled = the prompt, in the result and the audit row alike');
SELECT ok(bool_and(graft_ms >= 0 AND recompute_ms >= 0 AND coalesce(solve_tokens_saved, 0) >= 0
                   AND tokens_grafted >= 0 AND tokens_prefilled >= 0), 'no figure of kvg.stats is negative')
FROM kvg.stats;

-- kvg.threads 0, the default, is kvg.max_threads.
RESET kvg.threads;
SET LOCAL kvg.max_threads = 3;
SELECT is(current_setting('kvg.threads'), '0', 'kvg.threads defaults to 0');
SELECT is((kvg_model_info() ->> 'threads')::int, 3, 'which is kvg.max_threads');

-- Realistic costs: a call that runs the model is not a cheap operator, so
-- the planner tests every cheaper condition first.
SELECT is(ARRAY(SELECT p.proname::text FROM pg_proc p
                WHERE p.pronamespace = 'public'::regnamespace AND p.proname IN
                  ('kvg_answer', 'kvg_answer_detail', 'kvg_answers', 'kvg_generate', 'kvg_generate_bytes', 'kvg_generate_positional',
                   'kvg_chat', 'kvg_capture', 'kvg_graft_check', 'kvg_import', 'kvg_learn', 'kvg_solve')
                  AND p.procost < 1000000 ORDER BY 1),
          ARRAY[]::text[], 'every function that runs the model has COST 1,000,000 or more');
CREATE TEMP TABLE tickets AS SELECT g AS id, 'Question ' || g AS question FROM generate_series(1, 100) g;
ANALYZE tickets;
SELECT matches((SELECT string_agg(line, E'\n') FROM (SELECT * FROM pg_temp.plan_of(
                 $$SELECT id FROM tickets WHERE kvg_answer(question) IS NOT NULL AND id = 7$$)) AS p(line)),
               'Filter: \(\(id = 7\) AND \(kvg_answer',
               'the planner tests a cheap condition before calling kvg_answer');

SELECT * FROM finish();
ROLLBACK;
