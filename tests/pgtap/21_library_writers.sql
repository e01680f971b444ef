-- Only trusted roles write the shared library, entries are bounded when they
-- are deposited, and no entry can make another user's question fail
-- (docs/security.md, section 7). The attacks: eve, a plain kvg_user, took
-- question keys and marked answers verified with regex:.; and two
-- ~1,100-token entries of common words made every related question of
-- alice's fail with 54000 (the transfer prompt no longer fit the context).
BEGIN;
SELECT plan(10);
\getenv data KVG_TEST_DATA
SELECT set_config('kvg.model', :'data' || '/models/stories260K.gguf', true) \g /dev/null
SET LOCAL kvg.device = 'cpu';

CREATE ROLE tap_eve IN ROLE kvg_user;
CREATE ROLE tap_alice IN ROLE kvg_user;
CREATE ROLE tap_writer IN ROLE kvg_author;

-- A plain user writes nothing into the shared library, and solves nothing for it.
SET LOCAL ROLE tap_eve;
SELECT throws_ok($$SELECT kvg_learn('What is the secret word?', 'regex:.', 'The word is anything.', 'x')$$,
                 '42501', 'depositing into the shared library needs the role kvg_author',
                 'a kvg_user''s kvg_learn is refused');
SELECT throws_ok($$SELECT * FROM kvg_solve('What is the secret word?', 'regex:.', 4, 1)$$,
                 '42501', 'depositing into the shared library needs the role kvg_author',
                 'so is its kvg_solve, before any work');
SELECT throws_ok($$SET kvg.max_solution_tokens = 100000$$, '42501', NULL,
                 'kvg.max_solution_tokens is a superuser''s');
RESET ROLE;
SELECT is((SELECT count(*) FROM kvg.audit WHERE role = 'tap_eve'), 0::bigint,
          'the refused solve decoded nothing: no audit row');
SELECT is((SELECT count(*) FROM kvg.knowledge WHERE question = 'What is the secret word?'), 0::bigint,
          'and took no question key');

-- Entries are bounded at deposit.
SET LOCAL kvg.max_solution_tokens = 16;
SET LOCAL ROLE tap_writer;
SELECT throws_ok($$SELECT kvg_learn('What did the cat do?', 'contains',
                   'The cat sat on the mat with the dog, and the dog sat on the mat with the cat.', 'mat')$$,
                 '54000', NULL, 'a solution longer than kvg.max_solution_tokens is refused');
RESET ROLE;
RESET kvg.max_solution_tokens;

-- Two long entries that share the words of alice's question: together they
-- cannot fit the context with it (each ~1,060 tokens; the context is 2,048).
SET LOCAL kvg.max_solution_tokens = 1500;
SET LOCAL ROLE tap_writer;
SELECT kvg_learn('What did the cat do on the mat?', 'contains', repeat('The cat sat on the mat with the dog. ', 76), 'mat')
  \g /dev/null
SELECT kvg_learn('What did the dog do on the mat?', 'contains', repeat('The dog sat on the mat with the cat. ', 76), 'mat')
  \g /dev/null
RESET ROLE;
SELECT cmp_ok((SELECT sum(cardinality(kvg_tokenize(solution)))::integer FROM kvg.knowledge WHERE answer = 'mat'), '>',
              ((public.kvg_model_info())->>'n_ctx')::integer, 'the two solutions together exceed the context');
SET LOCAL kvg.transfer_min_similarity = 0.3;
SET LOCAL kvg.transfer_max_entries = 2;
SET LOCAL ROLE tap_alice;
SELECT lives_ok($$SELECT * FROM kvg_answer_detail('What did the cat and the dog do on the mat?', 4)$$,
                'alice''s related question is answered, not refused');
SELECT is(mode, 'transfer', 'from the entry that fits (the other is left out)')
FROM kvg_answer_detail('What did the cat and the dog do on the mat?', 4);
SELECT is(tokens_grafted + tokens_prefilled < ((public.kvg_model_info())->>'n_ctx')::integer, true,
          'its prompt fits the context')
FROM kvg_answer_detail('What did the cat and the dog do on the mat?', 4);
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
