-- kvg.max_context (docs/sql.md; docs/long-context.md, "Past the trained
-- context"): the positions one call's context may reach, the model's
-- context_length unless a superuser raises it. Past it the arithmetic is
-- the same, so every exactness rule holds there too: in a backend and in
-- the engine worker, grafted (mapped in the worker) and recomputed.
BEGIN;
SELECT plan(10);
\ir small_model.psql
SET LOCAL kvg.prefix_reuse = off;

SELECT is((kvg_model_info() ->> 'n_ctx')::int, 2048, 'the story model was trained on 2048 positions');
SELECT ARRAY(SELECT CASE WHEN i = 1 THEN 1 ELSE 3 + (i * 7919) % 509 END FROM generate_series(1, 4200) i) AS story \gset
\set long '(' :'story' '::int[])[1:2100]'
SELECT throws_ok(format('SELECT kvg_generate(%s, 8)', :'long'), '54000', 'prompt of 2100 tokens exceeds the context length 2048',
                 'by default a 2100-token prompt is past the context: refused (54000)');

SET LOCAL kvg.max_context = 4096;
SET LOCAL kvg.engine = backend;
SELECT kvg_generate(:long, 8) AS recomputed,
       encode(kvg_generate_bytes(:long, 8, NULL, 7, 0.9), 'hex') AS recomputed_sampled \gset
SELECT ok(length(:'recomputed') > 0, 'raised to 4096, a backend generates after the 2100 tokens');
SET LOCAL kvg.engine = worker;
SELECT is(kvg_generate(:long, 8), :'recomputed'::text, 'the engine worker gives the same text');
SELECT is(encode(kvg_generate_bytes(:long, 8, NULL, 7, 0.9), 'hex'), :'recomputed_sampled'::text,
          '... and the same sampled bytes');

-- A chain whose positions run past 2048, and the rest after it.
SELECT kvg_capture((:'story'::int[])[1:1000]) AS head \gset
SELECT kvg_capture((:'story'::int[])[1001:2060], :'head') AS past \gset
\set rest '(' :'story' '::int[])[2061:2100]'
SELECT is(kvg_generate(:rest, 8, :'past'), :'recomputed'::text,
          'a chain past the trained context, attended in place by the worker: the recompute''s text');
SET LOCAL kvg.engine = backend;
SELECT is(kvg_generate(:rest, 8, :'past'), :'recomputed'::text, '... and grafted into a backend''s cache');
SELECT is(encode(kvg_generate_bytes(:rest, 8, :'past', 7, 0.9), 'hex'), :'recomputed_sampled'::text,
          '... with the same sampled bytes');

SELECT throws_ok(format('SELECT kvg_generate(%L::int[], 8)', :'story'), '54000',
                 'prompt of 4200 tokens exceeds the context length 4096', 'the raised bound bounds');

CREATE ROLE tap_context_user IN ROLE kvg_user;
SET SESSION AUTHORIZATION tap_context_user;
SELECT throws_ok($$SET kvg.max_context = 4096$$, '42501', NULL, 'only a superuser may raise it');
RESET SESSION AUTHORIZATION;

SELECT * FROM finish();
ROLLBACK;
