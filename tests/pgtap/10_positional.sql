-- Positional composition (docs/composition.md): an explicit, non-exact
-- option. Its result and its audit row say exact = false (mode 'positional',
-- kv_proven = false); kvg.require_exact refuses it, and a role it is set for
-- cannot switch it off; bad input gets a clear error and leaves no row.
BEGIN;
SELECT plan(22);
\getenv data KVG_TEST_DATA
\set small :data '/models/stories260K.gguf'
\set other :data '/models/TinyStories-656K-Q8_0.gguf'
SELECT set_config('kvg.model', :'small', true) \g /dev/null
SET LOCAL kvg.device = 'cpu';

SELECT kvg_capture('Once upon a time, there was a girl named Zoe. Zoe had a pink dress.') AS zoe \gset
SELECT kvg_capture('Tom had a blue kite. Tom flew his blue kite in the park.') AS tom \gset
SELECT coalesce(max(id), 0) AS audit_before FROM kvg.audit \gset

SELECT * FROM kvg_generate_positional(ARRAY[:'zoe', :'tom'], E'\nZoe had a', 8) \gset p_
SELECT is(:'p_exact'::boolean, false, 'the result says exact = false');
SELECT cmp_ok(:'p_tokens_composed'::int, '>', 20, 'both blocks were composed');
SELECT is(:'p_tokens_decoded'::int, 8, 'eight tokens decoded');
SELECT is((SELECT row(operation, mode, kv_proven, tokens_grafted, artifact_sha256)::text FROM kvg.audit
           WHERE id = :p_audit_id),
          row('generate', 'positional', false, :p_tokens_composed, :'tom')::text,
          'the audit row: mode positional, kv_proven false, the composed tokens, the last block');
SELECT is((SELECT input_sha256 FROM kvg.audit WHERE id = :p_audit_id),
          encode(sha256(convert_to(:'zoe' || E'\n' || :'tom' || E'\n' || E'\nZoe had a', 'UTF8')), 'hex'),
          'input_sha256 names the blocks in order and the prompt');
SELECT is((SELECT output_text FROM kvg.audit WHERE id = :p_audit_id), :'p_output', 'the output is audited');
SELECT is((kvg_audit_verify()).ok, true, 'the chain verifies');
-- Deterministic (greedy), and not the exact chain's computation.
SELECT is((SELECT output FROM kvg_generate_positional(ARRAY[:'zoe', :'tom'], E'\nZoe had a', 8)), :'p_output',
          'the same blocks and prompt give the same output');
SELECT isnt((SELECT output FROM kvg_generate_positional(ARRAY[:'tom', :'zoe'], E'\nZoe had a', 8)), NULL,
            'another order composes too');

-- Bad input.
SELECT throws_ok(format('SELECT * FROM kvg_generate_positional(ARRAY[%L], %L, 8)', :'zoe', 'x'), '22023',
                 NULL, 'one block is refused (it would be an exact graft)');
SELECT throws_like(format('SELECT * FROM kvg_generate_positional(ARRAY[%L, NULL], %L, 8)', :'zoe', 'x'),
                   '%artifacts[2] is NULL%', 'a NULL block is refused');
SELECT throws_ok(format('SELECT * FROM kvg_generate_positional(ARRAY[%L, %L], %L, 8)', :'zoe', 'nothex', 'x'),
                 '22023', NULL, 'a block that is not a SHA-256 is refused');
SELECT throws_ok(format('SELECT * FROM kvg_generate_positional(ARRAY[%L, %L], %L, 8)', :'zoe', repeat('0', 64), 'x'),
                 '42704', NULL, 'an unknown block is refused');
SELECT throws_like(format('SELECT * FROM kvg_generate_positional(ARRAY[%s], %L, 8)',
                          (SELECT string_agg(quote_literal(:'zoe'), ',') FROM generate_series(1, 100)), 'x'),
                   '%more than the window%', 'a composition longer than the window is refused');
SELECT throws_ok(format('SELECT * FROM kvg_generate_positional(ARRAY[%L, %L], %L, 0)', :'zoe', :'tom', 'x'),
                 '22023', NULL, 'max_tokens 0 is refused');
-- A block of another model.
SELECT set_config('kvg.model', :'other', true) \g /dev/null
SELECT kvg_capture('Ben went to the beach.') AS ben \gset
SELECT set_config('kvg.model', :'small', true) \g /dev/null
SELECT throws_ok(format('SELECT * FROM kvg_generate_positional(ARRAY[%L, %L], %L, 8)', :'zoe', :'ben', 'x'),
                 '22V01', NULL, 'a block of another model is refused');
SELECT is((SELECT count(*) FROM kvg.audit WHERE id > :audit_before AND mode = 'positional'), 3::bigint,
          'refused calls leave no audit row');

-- kvg.require_exact: superuser only; refuses positional compositions.
SET LOCAL kvg.require_exact = on;
SELECT throws_ok(format('SELECT * FROM kvg_generate_positional(ARRAY[%L, %L], %L, 8)', :'zoe', :'tom', 'x'),
                 '0A000', NULL, 'kvg.require_exact refuses a positional composition');
SELECT lives_ok(format('SELECT kvg_generate(%L, 4)', 'Once upon a time'), 'exact calls still run');
SET LOCAL kvg.require_exact = off;
CREATE ROLE tap_regulated IN ROLE kvg_user;
SET LOCAL ROLE tap_regulated;
SELECT throws_ok('SET kvg.require_exact = off', '42501', NULL, 'a role cannot change kvg.require_exact');
RESET ROLE;
SELECT is(pg_catalog.current_setting('kvg.require_exact'), 'off', 'the setting is off here');
SELECT lives_ok(format('SELECT * FROM kvg_generate_positional(ARRAY[%L, %L], %L, 2)', :'zoe', :'tom', 'x'),
                'with it off, positional composition runs');

SELECT * FROM finish();
ROLLBACK;
