-- The flywheel evaluation of `kvg eval`, from SQL (docs/flywheel.md
-- "Measuring it"): the same phases over a JSONL file of questions, through
-- kvg_answer_detail and kvg_learn, printing one JSON object with the fields
-- `kvg eval --json` prints. Run it in a database whose library is empty:
--
--   kvg eval --generator digit-rule --seed 11 --count 500 --dump /tmp/q.jsonl
--   psql -X -At -v model=/path/model.gguf -v questions=/tmp/q.jsonl -v learn=250 \
--        -v template="$(printf '{solution}\n{question}')" -v max_tokens=96 -f scripts/eval.sql
--
-- Each line of the file is {"question", "answer", "verifier"?, "solution"?,
-- "kind"?}. The first :learn lines are the learning part. Phases:
--   cold       every question asked before anything is learned
--   recurring  the learning part's solutions deposited with kvg_learn (a
--              question without one with its cold answer, when that
--              verified), then the same questions asked again
--   transfer   the held-out questions asked (routed to related entries)
-- An answer is right when it passes its verifier (kvg.verify's built-in
-- forms, or a verifier function called with (question, answer)).
\set ON_ERROR_STOP on
\set QUIET on
SET client_min_messages = warning;
SELECT set_config('kvg.model', :'model', false) \g /dev/null
SELECT set_config('kvg.device', 'cpu', false) \g /dev/null
SELECT set_config('kvg.knowledge_template', :'template', false) \g /dev/null
-- As kvg eval's defaults: one related entry as context, half the question's words shared.
SET kvg.transfer_max_entries = 1;
SET kvg.transfer_min_similarity = 0.5;

DO $$ BEGIN
  IF EXISTS (SELECT 1 FROM kvg.knowledge) THEN
    RAISE EXCEPTION 'scripts/eval.sql needs an empty library (cold answers would be routed): use a fresh database';
  END IF;
END $$;

-- The file, a line a row (a CSV format whose quote and delimiter never occur
-- in JSON text, so every byte of the line arrives as it is).
CREATE TEMP TABLE eval_lines (n bigserial, line text);
\set copy_cmd '\\copy eval_lines (line) FROM ' :'questions' ' WITH (FORMAT csv, QUOTE E''\\x01'', DELIMITER E''\\x02'')'
:copy_cmd
CREATE TEMP TABLE eval_items AS
  SELECT row_number() OVER (ORDER BY n) AS n, j->>'question' AS question, j->>'answer' AS answer,
         coalesce(j->>'verifier', 'contains') AS verifier, j->>'solution' AS solution, coalesce(j->>'kind', '') AS kind
  FROM (SELECT n, line::jsonb AS j FROM eval_lines WHERE btrim(line) <> '') l;

CREATE FUNCTION pg_temp.eval_verify(verifier text, question text, candidate text, reference text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE ok boolean;
BEGIN
  IF verifier = 'contains' OR starts_with(verifier, 'exact:') OR starts_with(verifier, 'regex:') THEN
    RETURN kvg.verify(verifier, question, candidate, reference);
  END IF;
  EXECUTE format('SELECT %s($1, $2)', verifier::regproc) INTO ok USING question, candidate;
  RETURN coalesce(ok, false);
END $$;

CREATE TEMP TABLE eval_answers (phase text, n bigint, answer text, mode text, correct boolean,
                                prompt_tokens int, grafted int, decoded int, ms float8);
CREATE FUNCTION pg_temp.ask(phase text, item eval_items, max_tokens int) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  SELECT * INTO r FROM kvg_answer_detail(item.question, max_tokens);
  INSERT INTO eval_answers VALUES (phase, item.n, r.answer, r.mode,
    pg_temp.eval_verify(item.verifier, item.question, r.answer, item.answer),
    r.tokens_grafted + r.tokens_prefilled, r.tokens_grafted, r.tokens_decoded, r.graft_ms + r.decode_ms);
END $$;

-- In the file's order, as kvg eval: the order of deposits decides which of
-- equally related entries a transfer gets (the earliest learned).
SELECT set_config('eval.learn', :'learn', false), set_config('eval.max_tokens', :'max_tokens', false) \g /dev/null
DO $$
DECLARE
  i eval_items;
  learn bigint := current_setting('eval.learn')::bigint;
  max_tokens int := current_setting('eval.max_tokens')::int;
  cold_answer text;
  cold_correct boolean;
  solution text;
BEGIN
  FOR i IN SELECT * FROM eval_items ORDER BY n LOOP
    PERFORM pg_temp.ask('cold', i, max_tokens);
  END LOOP;
  FOR i IN SELECT * FROM eval_items WHERE n <= learn ORDER BY n LOOP
    SELECT answer, correct INTO cold_answer, cold_correct FROM eval_answers WHERE phase = 'cold' AND n = i.n;
    -- No solution given: the cold answer is one when it verified (as kvg_solve deposits).
    solution := coalesce(i.solution, CASE WHEN cold_correct THEN cold_answer END);
    CONTINUE WHEN solution IS NULL;
    -- kvg_learn refuses a solution its verifier rejects; the harness skips those, as kvg eval does.
    CONTINUE WHEN NOT (CASE WHEN i.verifier = 'contains' THEN kvg.verify('contains', i.question, solution, i.answer)
                            ELSE pg_temp.eval_verify(i.verifier, i.question, i.answer, i.answer) END);
    PERFORM kvg_learn(question => i.question, verifier => i.verifier, solution => solution, answer => i.answer);
  END LOOP;
  FOR i IN SELECT * FROM eval_items ORDER BY n LOOP
    PERFORM pg_temp.ask(CASE WHEN i.n <= learn THEN 'recurring' ELSE 'transfer' END, i, max_tokens);
  END LOOP;
END $$;

-- FLOPs per answer, an estimate from the model's shape (as kvg eval's
-- eval_flops): 2 x weights per computed position plus attention over the
-- positions before it.
CREATE TEMP TABLE eval_shape AS
  SELECT (m->>'n_layer')::float8 AS l, (m->>'n_embd')::float8 AS e, (m->>'n_head')::float8 * (m->>'head_dim')::float8 AS q,
         (m->>'n_head_kv')::float8 * (m->>'head_dim')::float8 AS kv, (m->>'n_ff')::float8 AS ff,
         (m->>'n_vocab')::float8 AS v
  FROM kvg_model_info() m;
CREATE FUNCTION pg_temp.flops(from_pos int, computed int) RETURNS float8 LANGUAGE sql AS $$
  SELECT coalesce(sum(2 * (s.l * (s.e * (2 * s.q + 2 * s.kv) + 3 * s.e * s.ff) + s.e * s.v) + 4 * s.l * (p + 1) * s.q), 0)
  FROM eval_shape s, generate_series(from_pos, from_pos + computed - 1) p
$$;

WITH per AS (
  SELECT a.*, i.kind,
         pg_temp.flops(a.grafted, (a.prompt_tokens - a.grafted) + greatest(a.decoded - 1, 0)) AS flops
  FROM eval_answers a JOIN eval_items i USING (n)),
summary AS (
  SELECT phase, kind, jsonb_build_object(
    'accuracy', round((avg(correct::int))::numeric, 6), 'questions', count(*), 'correct', sum(correct::int),
    'decode_tokens_mean', round(avg(decoded)::numeric, 4), 'prefill_tokens_mean', round(avg(prompt_tokens - grafted)::numeric, 4),
    'grafted_tokens_mean', round(avg(grafted)::numeric, 4), 'ms_mean', round(avg(ms)::numeric, 4),
    'flops_mean', round(avg(flops)::numeric)) AS s
  FROM per GROUP BY GROUPING SETS ((phase), (phase, kind)))
SELECT jsonb_build_object('questions', (SELECT count(*) FROM eval_items), 'learning', :learn,
                          'deposited', (SELECT count(*) FROM kvg.knowledge))
       || (SELECT jsonb_object_agg(p.phase, p.s || jsonb_build_object('by_kind',
                    (SELECT coalesce(jsonb_object_agg(k.kind, k.s), '{}'::jsonb) FROM summary k
                     WHERE k.phase = p.phase AND k.kind IS NOT NULL AND k.kind <> '')))
           FROM summary p WHERE p.kind IS NULL);
