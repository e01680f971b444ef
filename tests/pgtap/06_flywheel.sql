-- The knowledge flywheel as a kvg_user sees it: every call is audited in its
-- transaction and rolls back with it (entry, artifacts, large objects, audit
-- rows), deposits are written with the owner's rights, two sessions learning
-- one question at once keep one entry, and another session answers a
-- recurring question with the same bytes.
BEGIN;
SELECT plan(40);
\ir fixtures.psql
\getenv data KVG_TEST_DATA
\set small :data '/models/stories260K.gguf'
SELECT set_config('kvg.model', :'small', true) \g /dev/null
SELECT set_config('kvg.device', 'cpu', true) \g /dev/null

CREATE FUNCTION pg_temp.stored() RETURNS text LANGUAGE sql AS $$
  -- A rolled-back call's audit row stays, naming its aborted caller, and so
  -- do its artifacts, committed by the audit writer but claimed by nobody
  -- (kvg_vacuum collects them: docs/audit-chain.md, "Artifacts"): what is
  -- left is counted apart from those.
  -- Counted as the superuser sees it (RESET ROLE): a kvg_user sees
  -- only its own and published artifacts (docs/security.md, section 9).
  SELECT format('%s entries, %s claimed artifacts, %s large objects of no artifact, '
                '%s audit rows of callers not rolled back',
                (SELECT count(*) FROM kvg.knowledge), (SELECT count(DISTINCT sha256) FROM kvg.artifact_claims),
                (SELECT count(*) FROM pg_largeobject_metadata m
                 WHERE NOT EXISTS (SELECT FROM kvg.artifacts a WHERE a.loid = m.oid)),
                (SELECT count(*) FROM kvg.readable_audit WHERE pg_xact_status(caller_xid) IS DISTINCT FROM 'aborted'))
$$;
CREATE FUNCTION pg_temp.connect(name text) RETURNS text LANGUAGE sql AS $$
  SELECT dblink_connect(name, format('dbname=%s host=%s port=%s user=%s', current_database(),
                                     current_setting('unix_socket_directories'), current_setting('port'),
                                     current_user))
$$;
\set story 'Mia had a green hat. Mia wore her green hat to school every day.'

-- Two sessions learn the same question at once (before this transaction
-- holds the audit chain's head): the second waits for the first and returns
-- its entry. They commit, so the question is unique to this test.
SELECT pg_temp.connect('a'), pg_temp.connect('b') \g /dev/null
SELECT dblink_exec(c, format('SET kvg.model = %L', :'small')), dblink_exec(c, 'SET kvg.device = cpu')
FROM unnest(ARRAY['a', 'b']) c \g /dev/null
SELECT format('SELECT public.kvg_learn(%L, ''contains'', %L, %L)', 'What colour was Mia''s hat?', :'story', 'green') AS learn_sql \gset
SELECT dblink_exec('a', 'BEGIN') \g /dev/null
SELECT id AS mia FROM dblink('a', :'learn_sql') AS t(id bigint) \gset
SELECT dblink_send_query('b', :'learn_sql') \g /dev/null
SELECT pg_sleep(0.3) \g /dev/null
SELECT is(dblink_is_busy('b'), 1, 'a second session learning the same question waits for the first');
SELECT dblink_exec('a', 'COMMIT') \g /dev/null
SELECT is((SELECT id FROM dblink_get_result('b') AS t(id bigint)), :mia::bigint, 'and gets the same entry');
SELECT * FROM dblink_get_result('b') AS t(id bigint) \g /dev/null
SELECT is((SELECT count(*) FROM kvg.knowledge WHERE question = 'What colour was Mia''s hat?'), 1::bigint,
          'one entry');
-- Another session answers the recurring question with the same bytes.
SELECT answer AS other_session_answer FROM dblink('b', $$SELECT answer FROM public.kvg_answer_detail('What colour was Mia''s hat?', 8)$$) AS t(answer text) \gset
SELECT dblink_disconnect('a'), dblink_disconnect('b') \g /dev/null

CREATE ROLE tap_learner IN ROLE kvg_author;  -- deposits into the shared library need kvg_author
SET ROLE tap_learner;
SELECT is(answer, :'other_session_answer',
          'a recurring answer is the same bytes in another session and for another role')
FROM public.kvg_answer_detail('What colour was Mia''s hat?', 8);
SELECT is(mode, 'recurring', 'kvg_user asks the library') FROM public.kvg_answer_detail('What colour was Mia''s hat?', 8);
SELECT is(public.kvg_learn('What colour was Mia''s hat?', 'contains', :'story', 'green'), :mia::bigint,
          'learning the same entry again returns its id');
SELECT throws_ok(format('SELECT public.kvg_learn(%L, ''contains'', %L, %L)', 'What colour was Mia''s hat?',
                        'Mia had a red hat. Mia wore her red hat to school.', 'red'), '23505', NULL,
                 'the same question with another solution is refused');
RESET ROLE;  -- its audit row is not tap_learner's (counted below)
SELECT is(array_agg(ARRAY[verified::text, coalesce(knowledge_id::text, 'none')]), ARRAY[ARRAY['true', 'none']],
          'kvg_solve of a question in the library deposits nothing')
FROM public.kvg_solve('What colour was Mia''s hat?', 'regex:.', 8, 1);
SET ROLE tap_learner;
SELECT is((SELECT count(*) FROM kvg.knowledge WHERE question = 'What colour was Mia''s hat?'), 1::bigint,
          'still one entry');

-- Every call rolls back with its transaction: entry, artifacts, large objects, audit rows.
RESET ROLE;
SELECT pg_temp.stored() AS before \gset
SET ROLE tap_learner;
SAVEPOINT learn;
SELECT lives_ok(format('SELECT public.kvg_learn(%L, ''contains'', %L, %L)', 'Where did Sam play?',
                       'Sam went to the park. At the park, Sam played with his truck.', 'park'), 'a kvg_author learns');
SELECT is((SELECT verified_by FROM kvg.knowledge WHERE question = 'Where did Sam play?'), 'tap_learner'::name,
          'verified_by is the calling role');
RESET ROLE;
SELECT is(m.lomowner, n.nspowner, 'the entry''s large objects belong to the schema owner')
FROM kvg.knowledge k JOIN kvg.artifacts a ON a.sha256 = k.artifact_sha256
JOIN pg_largeobject_metadata m ON m.oid = a.loid, pg_namespace n
WHERE k.question = 'Where did Sam play?' AND n.nspname = 'kvg';
SET ROLE tap_learner;
ROLLBACK TO learn;
RESET ROLE;
SELECT is(pg_temp.stored(), :'before', 'a rolled-back kvg_learn leaves nothing');
SET ROLE tap_learner;

SAVEPOINT answer;
SELECT count(*) AS artifacts_before FROM kvg.readable_artifacts \gset
SELECT is(mode, 'transfer', 'a related question is a transfer')
FROM public.kvg_answer_detail('Mia wore her green hat to', 8);
SELECT is((SELECT count(*) FROM kvg.readable_artifacts), :artifacts_before::bigint + 1, 'which stores its composition as a chain link');
ROLLBACK TO answer;
RESET ROLE;
SELECT is(pg_temp.stored(), :'before', 'a rolled-back kvg_answer leaves nothing');
SET ROLE tap_learner;

SAVEPOINT solve;
SELECT is(count(*), 2::bigint, 'kvg_solve reports each attempt')
FROM public.kvg_solve('The cat sat on the', 'regex:^zzz', 4, 2);
SELECT is((SELECT count(*) FROM kvg.readable_audit WHERE operation = 'solve' AND role = 'tap_learner'), 2::bigint,
          'one audit row per attempt');
ROLLBACK TO solve;
RESET ROLE;
SELECT is(pg_temp.stored(), :'before', 'a rolled-back kvg_solve leaves nothing');
SET ROLE tap_learner;

-- One audit row per call, naming the role, with its output.
SELECT public.kvg_answer('What colour was Mia''s hat?', 4) \g /dev/null
SELECT public.kvg_answer('A frog sat on a log', 4) \g /dev/null
SELECT public.kvg_learn('What colour was Mia''s hat?', 'contains', :'story', 'green') \g /dev/null
RESET ROLE;
SELECT is(array_agg(call ORDER BY id), ARRAY['tap_learner answer:recurring', 'tap_learner answer:cold', 'tap_learner learn:-'],
          'an audit row for every call, in order, naming the role')
FROM (SELECT id, role || ' ' || operation || ':' || coalesce(mode, '-') AS call FROM kvg.readable_audit ORDER BY id DESC LIMIT 3) last;
SELECT ok(bool_and(output_sha256 = encode(sha256(convert_to(output_text, 'UTF8')), 'hex')),
          'each answer row holds its output and its hash')
FROM kvg.readable_audit WHERE role = 'tap_learner' AND operation = 'answer';
SELECT is((public.kvg_audit_verify()).ok, true, 'the chain verifies');

-- kvg_answer never hides a rejection: Mia's entry wants "green", and the
-- small model's answer does not say it (kvg_answer_detail: verified = false).
SET ROLE tap_learner;
SELECT is(verified, false, 'the small model''s answer to Mia''s question fails its verifier')
FROM public.kvg_answer_detail('What colour was Mia''s hat?', 8);
SELECT count(*) AS rejected_rows FROM kvg.readable_audit WHERE verified = false \gset
SELECT is(public.kvg_answer('What colour was Mia''s hat?', 8), NULL,
          'kvg_answer returns NULL for an answer its verifier rejects (with a WARNING)');
SET kvg.on_rejected_answer = error;
SELECT throws_ok($$SELECT public.kvg_answer('What colour was Mia''s hat?', 8)$$, '22V05',
                 'the entry''s verifier rejects the answer to this recurring question',
                 'or raises 22V05 under kvg.on_rejected_answer = error');
RESET kvg.on_rejected_answer;
SELECT is((SELECT count(*) FROM kvg.readable_audit WHERE verified = false), :rejected_rows::bigint + 2,
          'both calls are audited, with verified = false');
-- An answer its verifier accepts is returned as it is, and so is a cold one.
SELECT public.kvg_learn('Where did Pip go?', 'regex:^', 'Pip went to the sea. Pip swam in the sea.', 'sea') \g /dev/null
SELECT is(public.kvg_answer('Where did Pip go?', 8), (SELECT answer FROM public.kvg_answer_detail('Where did Pip go?', 8)),
          'a verified answer is returned');
SELECT is(public.kvg_answer('A frog sat on a log', 4), (SELECT answer FROM public.kvg_answer_detail('A frog sat on a log', 4)),
          'a cold answer (no verifier) is returned');
RESET ROLE;

-- Every answer's template is kept by the hash its row names, whatever the
-- setting says later: an auditor rebuilds the prompt from it.
SET kvg.knowledge_template = E'Fact: {solution}\nQ: {question}\nA:';
SELECT audit_id AS templated FROM public.kvg_answer_detail('What colour was Mia''s hat?', 4) \gset
RESET kvg.knowledge_template;
SELECT is(t.template, E'Fact: {solution}\nQ: {question}\nA:', 'an answer''s template is recorded by the hash its row names')
FROM kvg.audit a JOIN kvg.knowledge_templates t ON t.sha256 = a.template_sha256 WHERE a.id = :templated;
SELECT is(count(*), 0::bigint, 'every answer row''s template is there')
FROM kvg.audit a WHERE a.template_sha256 IS NOT NULL
  AND NOT EXISTS (SELECT FROM kvg.knowledge_templates t WHERE t.sha256 = a.template_sha256);
SELECT ok(has_table_privilege('kvg_auditor', 'kvg.knowledge_templates', 'SELECT')
          AND NOT has_table_privilege('kvg_user', 'kvg.knowledge_templates', 'SELECT'),
          'auditors read the templates; users do not (a user''s template may hold her text)');
SELECT throws_ok($$UPDATE kvg.knowledge_templates SET template = 'x'$$, '42501', NULL, 'templates are never changed');
SELECT throws_ok($$SELECT kvg.audit_insert('answer', 'postgres', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                            template_sha256 => repeat('0', 64), template_text => '{solution} {question}')$$,
                 '22023', 'template_text is not the text of template_sha256', 'nor recorded under another''s hash');

-- Another model: the entry's artifact does not graft (it is that model's KV),
-- so its prompt is computed once and stored for this model, then grafted.
SAVEPOINT other_model;
SELECT set_config('kvg.model', :'data' || '/models/TinyStories-656K-Q8_0.gguf', true) \g /dev/null
SELECT is(tokens_grafted, 0, 'under another model a recurring prompt is computed')
FROM public.kvg_answer_detail('What colour was Mia''s hat?', 4);
SELECT is((mode, tokens_prefilled)::text, '(recurring,1)', 'and stored: the next call grafts it')
FROM public.kvg_answer_detail('What colour was Mia''s hat?', 4);
ROLLBACK TO other_model;

-- The library is written by kvg only.
SET ROLE tap_learner;
SELECT throws_ok($$DELETE FROM kvg.knowledge$$, '42501', NULL, 'kvg_user cannot delete entries');
SELECT throws_ok($$INSERT INTO kvg.knowledge (question, question_key, solution, answer, verifier, evidence,
                     verified_by, artifact_sha256) VALUES ('q', repeat('0', 64), 's', 'a', 'contains', 'e', 'x', 'y')$$,
                 '42501', NULL, 'kvg_user cannot forge an entry');
RESET ROLE;
SELECT throws_ok($$UPDATE kvg.knowledge SET answer = 'blue'$$, '42501', NULL, 'entries are never edited, not even by the owner');
SET CONSTRAINTS ALL IMMEDIATE;  -- the foreign key is deferred (for pg_restore)
SELECT throws_ok(format('DELETE FROM kvg.artifacts WHERE sha256 = %L',
                        (SELECT artifact_sha256 FROM kvg.knowledge WHERE id = :mia)),
                 '23503', NULL, 'an entry''s artifact cannot be deleted from under it');
SET CONSTRAINTS ALL DEFERRED;
SELECT is(pg_temp.orphan_objects(), 0::bigint, 'no orphan large objects');

SELECT * FROM finish();
ROLLBACK;
