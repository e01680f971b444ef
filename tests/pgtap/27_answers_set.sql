-- kvg_answers: a query's questions answered together (shared batched passes
-- in the engine worker, or in this backend), each row the bytes
-- kvg_answer_detail gives that question alone, verified and audited on its
-- own (docs/sql.md).
BEGIN;
SELECT plan(20);
\getenv data KVG_TEST_DATA
SELECT set_config('kvg.model', :'data' || '/models/stories260K.gguf', true) \g /dev/null
SET LOCAL kvg.device = 'cpu';

-- Questions with nothing to graft (the library is empty yet) start at once,
-- so every pass carries all six.
SET LOCAL kvg.engine = worker;
SELECT kvg_engine_worker_reset() \g /dev/null
-- The worker forgets its batch peak at its next round (1 s at most when idle).
SELECT pg_sleep(1.2) \g /dev/null
SELECT is((SELECT count(*) FROM kvg_answers(ARRAY['A frog sat on a log', 'The sun was hot', 'A big dog ran',
                                                  'The bird sang a song', 'Sam ate an apple', 'The boat was slow'], 8)),
          6::bigint, 'six cold questions answered together in the engine worker');
SELECT is((SELECT batch_peak FROM kvg_engine_worker()), 6, 'in passes that carried all six');

SELECT kvg_learn('Lily had a', 'regex:^', 'Lily had a red ball. Lily played with the red ball.', 'red') \g /dev/null
SELECT kvg_learn('What colour was Tom''s kite?', 'contains', 'Tom had a blue kite. Tom flew his blue kite.', 'blue') \g /dev/null

CREATE TEMP TABLE asked (n integer, question text);
INSERT INTO asked VALUES (1, 'Lily had a'), (2, 'What colour was Tom''s kite?'), (3, 'Tom flew his kite in the'),
  (4, 'A frog sat on a log'), (5, NULL), (6, E' \t'), (7, 'Lily had a');
SELECT max(id) AS audit_before FROM kvg.audit \gset

-- In the engine worker: one call whose generations are sequences of the
-- worker's, sharing its passes.
SELECT served AS served_before FROM kvg_engine_worker() \gset
CREATE TEMP TABLE together AS
SELECT * FROM kvg_answers((SELECT array_agg(question ORDER BY n) FROM asked), 12);
SELECT is(ARRAY(SELECT n FROM together ORDER BY n), ARRAY[1, 2, 3, 4, 7],
          'one row per real question, n its position (NULL and blank ones give none)');
SELECT is((SELECT count(*) FROM kvg.audit WHERE id > :audit_before AND operation = 'answer'), 5::bigint,
          'each answer audited on its own');
SELECT is((SELECT served - :served_before FROM kvg_engine_worker()), 5::bigint,
          'in worker mode the engine worker ran the five generations');

-- In this backend, in its own shared passes.
SET LOCAL kvg.engine = backend;
CREATE TEMP TABLE together_backend AS
SELECT * FROM kvg_answers((SELECT array_agg(question ORDER BY n) FROM asked), 12);
SELECT is(ARRAY(SELECT row(n, answer, mode, verified, knowledge_id, tokens_decoded)::text FROM together_backend ORDER BY n),
          ARRAY(SELECT row(n, answer, mode, verified, knowledge_id, tokens_decoded)::text FROM together ORDER BY n),
          'in this backend: the same rows as in the worker');

-- Each alone, in this backend and in the engine worker.
SET LOCAL kvg.engine = backend;
CREATE TEMP TABLE alone AS
SELECT a.n, d.* FROM asked a, LATERAL kvg_answer_detail(a.question, 12) d;
SET LOCAL kvg.engine = worker;
CREATE TEMP TABLE alone_worker AS
SELECT a.n, d.* FROM asked a, LATERAL kvg_answer_detail(a.question, 12) d;
SELECT is(ARRAY(SELECT row(n, answer, mode, verified, knowledge_id, tokens_decoded)::text FROM together ORDER BY n),
          ARRAY(SELECT row(n, answer, mode, verified, knowledge_id, tokens_decoded)::text FROM alone ORDER BY n),
          'every answer, mode, verdict and length is what the question gets alone');
SELECT is(ARRAY(SELECT row(n, answer)::text FROM together ORDER BY n),
          ARRAY(SELECT row(n, answer)::text FROM alone_worker ORDER BY n),
          'and what it gets alone in the engine worker');
SELECT is((SELECT array_agg(DISTINCT mode ORDER BY mode) FROM together), ARRAY['cold', 'recurring', 'transfer'],
          'recurring, transfer and cold questions in one call');
SELECT is((SELECT question FROM together WHERE n = 2), 'What colour was Tom''s kite?', 'each row names its question');
SELECT ok((SELECT bool_and(tokens_grafted > 0) FROM together WHERE mode = 'recurring'),
          'a recurring question grafts its entry''s artifact');
SELECT is((SELECT count(*) FROM kvg.readable_audit a JOIN together t ON t.audit_id = a.id
           WHERE a.output_text = t.answer AND a.input_sha256 = encode(sha256(convert_to(t.question, 'UTF8')), 'hex')),
          5::bigint, 'each row''s audit_id names its row: its question and its answer');

SELECT is((SELECT count(*) FROM kvg_answers(NULL)), 0::bigint, 'a NULL array: no row');
SET LOCAL kvg.engine = worker;
SELECT is((SELECT count(*) FROM kvg_answers(ARRAY[]::text[])), 0::bigint, 'an empty one: no row');
SELECT throws_ok($$SELECT * FROM kvg_answers(array_fill('Lily had a'::text, ARRAY[257]))$$, '54000',
                 'questions holds 257 elements, more than 256', 'more than 256 questions are refused before any work');
SELECT throws_ok($$SELECT * FROM kvg_answers(ARRAY[['a', 'b'], ['c', 'd']])$$, '22023', NULL,
                 'a two-dimensional array is refused');

-- Their KV together is bounded by kvg.max_kv_memory: a question that fits
-- alone does not fit its 64th share, and the error says which limit.
SET LOCAL kvg.max_kv_memory = '64kB';
SELECT lives_ok($$SELECT * FROM kvg_answer_detail('Lily had a', 12)$$, 'one question fits in 64 kB alone');
SELECT throws_like($$SELECT * FROM kvg_answers(array_fill('Lily had a'::text, ARRAY[64]), 12)$$,
                   '%above kvg.max_kv_memory''s share for each prompt of the call = 1024 bytes%',
                   'sixty-four do not: each gets its share of kvg.max_kv_memory, and the error names it');
SELECT throws_ok($$SELECT * FROM kvg_answers(array_fill('Lily had a'::text, ARRAY[64]), 12)$$, '54000', NULL,
                 'as 54000, before any pass');
SET LOCAL kvg.engine = backend;
SELECT throws_like($$SELECT * FROM kvg_answers(array_fill('Lily had a'::text, ARRAY[64]), 12)$$,
                   '%above kvg.max_kv_memory''s share for each prompt of the call = 1024 bytes%',
                   'in this backend the same');

SELECT * FROM finish();
ROLLBACK;
