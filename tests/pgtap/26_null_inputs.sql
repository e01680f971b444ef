-- NULL or blank (empty, whitespace-only) inputs give NULL, or no row from a
-- set-returning function, and never an error that aborts the whole query
-- (docs/sql.md, "Rules every function follows"): one bad row of a table does
-- not cost the answers of the others. No work is done for them: no audit row.
BEGIN;
SELECT plan(26);
\ir fixtures.psql
\getenv data KVG_TEST_DATA
SELECT set_config('kvg.model', :'data' || '/models/stories260K.gguf', true) \g /dev/null
SET LOCAL kvg.device = 'cpu';

-- A verifier that accepts any answer: a rejected one would be NULL too (docs/sql.md).
SELECT kvg_learn('Lily had a', 'regex:^', 'Lily had a red ball. Lily played with the red ball.', 'red') \g /dev/null

CREATE TEMP TABLE tickets (id integer, question text);
INSERT INTO tickets VALUES (1, 'Lily had a'), (2, NULL), (3, ''), (4, E'  \t\n '), (5, 'Tom went to the');
SELECT count(*) AS audit_before FROM kvg.audit \gset

-- The query of the issue, exactly.
SELECT lives_ok($$CREATE TEMP TABLE answered AS SELECT t.id, kvg_answer(t.question, 8) AS answer FROM tickets t$$,
                'SELECT kvg_answer(t.question, 8) FROM tickets t runs with NULL and blank questions among them');
SELECT is(ARRAY(SELECT id FROM answered WHERE answer IS NOT NULL ORDER BY id), ARRAY[1, 5],
          'the real questions are answered');
SELECT is(ARRAY(SELECT id FROM answered WHERE answer IS NULL ORDER BY id), ARRAY[2, 3, 4],
          'the NULL and blank ones give NULL');
SELECT is((SELECT count(*) FROM kvg.audit) - :audit_before, 2::bigint, 'only the real questions were audited');
SELECT is((SELECT count(*) FROM tickets t, kvg_answer_detail(t.question, 8)), 2::bigint,
          'kvg_answer_detail: no row for a NULL or blank question');
SELECT is(kvg_answer('Lily had a', NULL), NULL, 'kvg_answer: NULL max_tokens gives NULL');

-- Every other function, NULL and blank.
SELECT is(kvg_generate(NULL), NULL, 'kvg_generate: NULL prompt');
SELECT is(kvg_generate('  '), NULL, 'kvg_generate: blank prompt without an artifact');
SELECT is(kvg_generate('Once', NULL), NULL, 'kvg_generate: NULL max_tokens');
SELECT is(kvg_generate('Once', 4, temperature => NULL), NULL, 'kvg_generate: NULL temperature');
SELECT is(kvg_generate_bytes(''), NULL, 'kvg_generate_bytes: empty prompt');
SELECT is(kvg_capture(NULL), NULL, 'kvg_capture: NULL prefix');
SELECT is(kvg_capture(E' \n'), NULL, 'kvg_capture: blank prefix');
SELECT is(kvg_learn(NULL, 'contains', 'x', 'x'), NULL, 'kvg_learn: NULL question');
SELECT is(kvg_learn('Who?', 'contains', '   ', 'x'), NULL, 'kvg_learn: blank solution');
SELECT is(kvg_learn('Who?', '', 'Tom did.', 'Tom'), NULL, 'kvg_learn: blank verifier');
SELECT is((SELECT count(*) FROM kvg_solve('', 'exact:red')), 0::bigint, 'kvg_solve: no row for a blank question');
SELECT is((SELECT count(*) FROM kvg_solve('Lily had a', NULL)), 0::bigint, 'kvg_solve: no row for a NULL verifier');
SELECT is(kvg_export(' '), NULL, 'kvg_export: blank artifact');
SELECT is((kvg_artifact_verify('')).ok, NULL, 'kvg_artifact_verify: NULL for a blank artifact');
SELECT is(kvg_import(''::bytea), NULL, 'kvg_import: no bytes');
SELECT is((SELECT count(*) FROM kvg_graft_check(pg_temp.fixture_sha('root'), ' ')), 0::bigint,
          'kvg_graft_check: no row for a blank continuation');
SELECT is(kvg_chat('[]'), NULL, 'kvg_chat: no messages');
SELECT is((SELECT count(*) FROM kvg_generate_positional(ARRAY[]::text[], 'x')), 0::bigint,
          'kvg_generate_positional: no row without artifacts');

-- Input that is present but wrong is still an error.
SELECT throws_ok($$SELECT kvg_export('abc')$$, '22023', NULL, 'a malformed artifact is still refused');
SELECT throws_ok($$SELECT kvg_generate('Once', 4, temperature => -1)$$, '22023', NULL,
                 'a negative temperature is still refused');

SELECT * FROM finish();
ROLLBACK;
