-- In worker mode the calls that compute KV to store (kvg_capture, kvg_learn),
-- kvg_solve's attempts, kvg_graft_check, kvg_import's recomputation and
-- kvg_generate_positional run in the engine worker, with the same bytes as
-- in a backend: the same artifacts (content-addressed: equal names are
-- equal bytes), the same entries, the same attempts, the same graft checks
-- and verdicts, the same compositions. The worker's `served` count says where each ran. A
-- backend in worker mode maps no model file.
BEGIN;
SELECT plan(37);
\getenv data KVG_TEST_DATA
\set small :data '/models/stories260K.gguf'
\ir sessions.psql
SELECT set_config('kvg.model', :'small', true) \g /dev/null
SET LOCAL kvg.device = 'cpu';
-- Everything computed: nothing grafted from an earlier call's chain.
SET LOCAL kvg.prefix_reuse = off;

CREATE FUNCTION pg_temp.served() RETURNS bigint LANGUAGE sql AS $$ SELECT served FROM kvg_engine_worker() $$;

-- Captures: a root, and a link continuing it (its parent grafted, in the
-- worker attended in place from its KV file).
\set root_text 'Once upon a time there was a little girl named Lily. She loved to play outside in the park.'
\set link_text ' One day she saw a big red ball under a tree, and she ran to get it.'
SET LOCAL kvg.engine = backend;
SELECT pg_temp.served() AS s0 \gset
SELECT kvg_capture(:'root_text') AS root_b \gset
SELECT kvg_capture(:'link_text', :'root_b') AS link_b \gset
SELECT is(pg_temp.served(), :s0::bigint, 'in backend mode the worker runs no capture');

SET LOCAL kvg.engine = worker;
SELECT is(kvg_capture(:'root_text'), :'root_b', 'a capture in the worker stores the artifact a backend stores');
SELECT is(pg_temp.served(), :s0 + 1::bigint, 'and it ran there');
SELECT is(kvg_capture(:'link_text', :'root_b'), :'link_b',
          'so does a capture that continues an artifact, grafted in the worker');
SELECT is(pg_temp.served(), :s0 + 2::bigint, 'which ran there too');
SELECT is((SELECT count(*) FROM kvg.readable_audit WHERE operation = 'capture' AND artifact_sha256 = :'link_b'),
          2::bigint, 'each capture has its audit row');
SET LOCAL kvg.max_kv_memory = '64kB';  -- about 50 positions of this model
SELECT throws_ok(format('SELECT kvg_capture(%L)', repeat(:'root_text', 4)), '54000', NULL,
                 'a capture beyond kvg.max_kv_memory is refused in the worker as in a backend');
RESET kvg.max_kv_memory;

-- A long capture cancelled while the worker computes it: nothing stored,
-- its sequence and its KV reservation gone; the same capture afterwards
-- stores what a backend stores.
\ir worker_cancel.psql
SELECT count(*) AS artifacts_before FROM kvg.artifacts \gset
SET LOCAL statement_timeout = '10ms';
SELECT is(pg_temp.cancelled('SELECT kvg_capture(array_fill(300, ARRAY[2000]))'), 'cancelled',
          'a long capture in the worker is cancelled by statement_timeout');
RESET statement_timeout;
SELECT ok(pg_temp.worker_idle() AND (SELECT count(*) FROM kvg.artifacts) = :artifacts_before,
          'it stored nothing, and the worker holds no sequence and reserves no KV after it');
SET LOCAL kvg.engine = backend;
SELECT kvg_capture(array_fill(300, ARRAY[2000])) AS long_b \gset
SET LOCAL kvg.engine = worker;
SELECT is(kvg_capture(array_fill(300, ARRAY[2000])), :'long_b', 'the same capture then stores a backend''s artifact');

-- A learned entry: its prompt's chain computed in the worker, then in a
-- backend after the entry is deleted: the same artifact.
SELECT pg_temp.served() AS s1 \gset
SELECT kvg_learn('What did Lily see under the tree?', 'contains', 'Lily saw a big red ball under a tree.',
                 'a big red ball') AS entry_w \gset
SELECT is(pg_temp.served(), :s1 + 1::bigint, 'kvg_learn computes its entry''s prompt in the worker');
SELECT artifact_sha256 AS entry_artifact FROM kvg.knowledge WHERE id = :entry_w \gset
SELECT ok(EXISTS (SELECT FROM kvg.artifacts WHERE sha256 = :'entry_artifact'), 'and stores its chain');
DELETE FROM kvg.knowledge WHERE id = :entry_w;
SET LOCAL kvg.engine = backend;
SELECT kvg_learn('What did Lily see under the tree?', 'contains', 'Lily saw a big red ball under a tree.',
                 'a big red ball') AS entry_b \gset
SELECT is((SELECT artifact_sha256 FROM kvg.knowledge WHERE id = :entry_b), :'entry_artifact',
          'learned in a backend, the entry names the same artifact');

-- Solves whose verifier accepts nothing: the greedy attempt and two sampled
-- retries, each decoded in the worker (a retry computes the prompt again
-- there) and in a backend (the prompt computed once).
CREATE TEMP TABLE solved_in_backend AS
  SELECT attempt, answer, verified, tokens_decoded, solve_tokens
  FROM kvg_solve('Where did Lily like to play?', 'exact:nowhere at all', 12, 3);
SELECT is((SELECT count(*) FROM solved_in_backend), 3::bigint, 'a backend''s solve made three attempts');
SET LOCAL kvg.engine = worker;
SELECT pg_temp.served() AS s2 \gset
SELECT results_eq($$SELECT attempt, answer, verified, tokens_decoded, solve_tokens
                    FROM kvg_solve('Where did Lily like to play?', 'exact:nowhere at all', 12, 3)$$,
                  $$SELECT * FROM solved_in_backend ORDER BY attempt$$,
                  'kvg_solve in the worker: the same attempts, answers, lengths and costs');
SELECT is(pg_temp.served(), :s2 + 3::bigint, 'each attempt ran in the worker');
SELECT is((SELECT (o)[1:3] FROM (SELECT array_agg(output_sha256 ORDER BY seq) AS o FROM kvg.readable_audit
                                  WHERE operation = 'solve' AND input_sha256 = encode(sha256('Where did Lily like to play?'), 'hex')) t),
          (SELECT (o)[4:6] FROM (SELECT array_agg(output_sha256 ORDER BY seq) AS o FROM kvg.readable_audit
                                  WHERE operation = 'solve' AND input_sha256 = encode(sha256('Where did Lily like to play?'), 'hex')) t),
          'their audit rows record the same whole outputs in both modes, attempt by attempt');

-- A graft check: its graft (the chain attended in place from the worker's
-- KV files) and its recompute are two sequences in the worker, which send
-- back their logits rows and sampled continuations; the backend judges them
-- as it judges its own. The same row in both modes, hashes and KL included.
SET LOCAL kvg.engine = backend;
SELECT pg_temp.served() AS s3 \gset
SELECT row(c.*)::text AS check_b FROM kvg_graft_check(:'link_b', ' She kicked the ball to her friend Tom.', 3) c \gset
SET LOCAL kvg.engine = worker;
SELECT is((SELECT row(c.*)::text FROM kvg_graft_check(:'link_b', ' She kicked the ball to her friend Tom.', 3) c),
          :'check_b', 'a graft check in the worker gives a backend''s hashes, KL, agreement and verdict');
SELECT is(pg_temp.served(), :s3 + 2::bigint, 'its graft and its recompute ran there, as two sequences');
SELECT ok(:'check_b' LIKE '%,0,1,t)', 'and that verdict is exact: KL 0, every argmax equal');
SELECT throws_ok(format('SELECT * FROM kvg_graft_check(%L, ARRAY[5, 999999])', :'root_b'), '22023', NULL,
                 'a check of a token outside the vocabulary is refused, in worker mode as in a backend');
SET LOCAL statement_timeout = '10ms';
SELECT is(pg_temp.cancelled(format('SELECT * FROM kvg_graft_check(%L, array_fill(300, ARRAY[1500]), 4)', :'root_b')),
          'cancelled', 'a long graft check in the worker is cancelled by statement_timeout');
RESET statement_timeout;
SELECT ok(pg_temp.worker_idle(), 'and leaves neither of its sequences nor their KV reservations behind');

-- kvg_import's recomputation: in the worker a capture that grafts nothing,
-- its link naming the stored parent. A link of a chain verifies there as in
-- a backend, and is recorded as verified.
SELECT kvg_export(:'link_b') AS link_bytes \gset
SET LOCAL kvg.engine = backend;
SELECT pg_temp.served() AS s4 \gset
SELECT is(kvg_import(:'link_bytes'), :'link_b', 'a backend verifies a chain''s link by recomputing it');
SELECT is(pg_temp.served(), :s4::bigint, 'without the worker');
SET LOCAL kvg.engine = worker;
SELECT is(kvg_import(:'link_bytes'), :'link_b', 'so does the worker, the link continuing its stored parent');
SELECT is(pg_temp.served(), :s4 + 1::bigint, 'where it ran');
SELECT is((SELECT kv_proven FROM kvg.readable_audit WHERE operation = 'import' ORDER BY seq DESC LIMIT 1), true,
          'and its audit row says the KV is proven');

-- A positional composition: the worker places the blocks in the sequence's
-- own cache, their keys turned as a backend turns them; the same output.
SET LOCAL kvg.engine = backend;
SELECT pg_temp.served() AS s5 \gset
SELECT row(p.output, p.exact, p.tokens_composed, p.tokens_prefilled, p.tokens_decoded)::text AS positional_b
  FROM kvg_generate_positional(ARRAY[:'root_b', :'link_b'], ' Then Lily', 12) p \gset
SET LOCAL kvg.engine = worker;
SELECT is((SELECT row(p.output, p.exact, p.tokens_composed, p.tokens_prefilled, p.tokens_decoded)::text
             FROM kvg_generate_positional(ARRAY[:'root_b', :'link_b'], ' Then Lily', 12) p),
          :'positional_b', 'a positional composition in the worker decodes a backend''s output, exact = false');
SELECT is(pg_temp.served(), :s5 + 1::bigint, 'and it ran there');
SELECT throws_ok(format('SELECT * FROM kvg_generate_positional(ARRAY[%L, %L], %L, 4)', :'root_b', :'link_b',
                        repeat(' and then', 3000)), '54000', NULL,
                 'a composition and prompt past the context are refused in worker mode as in a backend');

-- A fresh backend in worker mode prepares calls with the model loaded
-- without its weights: after generating, capturing, graft checking,
-- verifying an import, composing positionally, tokenizing and naming the
-- model, its own memory map (/proc/self/maps) has no model file in it.
-- Switched to backend mode, it maps the model to generate: then it does.
SELECT pg_temp.connect('w') \g /dev/null
SELECT dblink_exec('w', format('SET kvg.model = %L', :'small')) \g /dev/null
SELECT dblink_exec('w', 'SET kvg.device = cpu; SET kvg.engine = worker') \g /dev/null
SELECT dblink_exec('w', 'BEGIN') \g /dev/null
SELECT * FROM dblink('w', $$SELECT kvg_generate('Once upon a time', 8),
                                  (SELECT exact FROM kvg_graft_check(kvg_capture('Lily had a red ball.'), ' She liked', 1)),
                                  kvg_import(kvg_export(kvg_capture('Lily had a red ball.'))),
                                  (SELECT output FROM kvg_generate_positional(
                                     ARRAY[kvg_capture('Lily had a red ball.'), kvg_capture('Tom had a blue kite.')],
                                     ' They', 2)),
                                  kvg_tokenize('Lily'),
                                  kvg_model_info()->>'fingerprint'$$)
  AS t(g text, c boolean, i text, p text, tk int[], f text) \g /dev/null
SELECT is((SELECT mapped FROM dblink('w', format('SELECT strpos(pg_read_file(%L), %L) > 0', '/proc/self/maps', :'small'))
                              AS t(mapped boolean)),
          false, 'a backend in worker mode maps no model file, having generated, captured, graft checked, '
                 'verified an import, composed positionally and tokenized');
SELECT is((SELECT f FROM dblink('w', $$SELECT kvg_model_info()->>'fingerprint'$$) AS t(f text)),
          kvg_model_info()->>'fingerprint', 'and names the model by the fingerprint a backend that maps it computes');
SELECT dblink_exec('w', 'SET kvg.engine = backend') \g /dev/null
SELECT * FROM dblink('w', $$SELECT kvg_generate('Once upon a time', 2)$$) AS t(g text) \g /dev/null
SELECT is((SELECT mapped FROM dblink('w', format('SELECT strpos(pg_read_file(%L), %L) > 0', '/proc/self/maps', :'small'))
                              AS t(mapped boolean)),
          true, 'switched to backend mode, it maps the model to generate, and the check sees it');
SELECT dblink_exec('w', 'ROLLBACK') \g /dev/null
SELECT dblink_disconnect('w') \g /dev/null

-- A lone call is run at once: a sequence the idle worker admits is ready for
-- a pass, and the worker does not sleep before it (it once slept until its
-- caller read the admission reply, which woke it only by the bytes read; a
-- reply held back as progress left every lone call to the worker's 1 s idle
-- timer: 20 calls took 20 s). A liveness bound, not a speed: 20 one-token
-- calls take a few ms each.
SET LOCAL kvg.engine = worker;
SELECT clock_timestamp() AS lone_from \gset
SELECT count(kvg_generate('Lone call ' || i, 1)) FROM generate_series(1, 20) i \g /dev/null
SELECT cmp_ok(extract(epoch FROM clock_timestamp() - :'lone_from'::timestamptz), '<', 10::numeric,
              '20 lone one-token calls in the worker do not each wait for its idle timer');

-- Each call's segment (and its audit row's) comes out of main shared memory
-- (workers/segment/segment_space.hpp): kvg, preloaded, gives
-- min_dynamic_shared_memory a default where the configuration sets none
-- (this cluster's does not), as PostgreSQL's own computed defaults are given.
SELECT is((SELECT setting || unit FROM pg_settings WHERE name = 'min_dynamic_shared_memory'), '64MB',
          'min_dynamic_shared_memory is kvg''s 64MB where the server''s configuration does not set it');
SELECT is((SELECT source || ', ' || boot_val FROM pg_settings WHERE name = 'min_dynamic_shared_memory'), 'default, 0',
          'as a default, below every source a person sets (PostgreSQL''s own is 0)');

SELECT * FROM finish();
ROLLBACK;
