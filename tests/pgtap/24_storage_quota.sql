-- One storage quota (docs/security.md, of that name). The attack it closes: a
-- role with a 64 kB import quota stored 32.6 MB through kvg_capture in 12
-- calls; learns and answers' links were not charged; two concurrent imports
-- both passed a check-then-insert; SET ROLE opened another bucket. Now
-- kvg.storage_quota bounds every artifact stored on a role's behalf,
-- charged to the session user by the audit writer as it stores it, refused
-- with 53400 naming role, quota and usage; kvg.storage_usage shows it;
-- deleting an artifact uncharges it.
--
-- The writer commits artifacts and their charges in transactions of its
-- own, which this file's ROLLBACK does not undo: its roles and prompts carry
-- a tag of this run, and what its second sessions commit is deleted at the
-- end.
BEGIN;
SELECT plan(47);
\ir small_model.psql
\ir sessions.psql

-- Digits: each one token, so every run's prompts have the same length.
SELECT (10000000 + floor(random() * 89999999))::bigint AS tag \gset
SELECT 'tap_quota_' || :'tag' AS payer, 'tap_quota_group_' || :'tag' AS grp,
       'tap_quota_library_' || :'tag' AS librarian, 'tap_quota_racer_' || :'tag' AS racer \gset
CREATE ROLE :"payer" IN ROLE kvg_user;
CREATE ROLE :"grp" IN ROLE kvg_user;
GRANT :"grp" TO :"payer";
CREATE ROLE :"librarian" IN ROLE kvg_author;

-- Prompt n of this run, none a prefix of another (prefix reuse would store
-- only a continuation). With the vendored model (1,280 bytes of KV a
-- token) prompts 0 and 40 are 14 tokens, 18,272-byte artifacts; the others
-- 30 or 31 tokens, ~39 kB each: after prompt 0, one of them fits 64 kB.
CREATE TEMP TABLE prompt AS
  SELECT n, CASE n WHEN 0 THEN format('Run %s.', :'tag')
                   WHEN 40 THEN format('Run %s!', :'tag')
                   ELSE format('Run %s, story %s: Lily found a red ball.', :'tag', n) END AS text
  FROM generate_series(0, 40) n;
CREATE TEMP TABLE outcome (batch text, n int, artifact text, state text, message text);
GRANT SELECT ON prompt TO PUBLIC;
GRANT INSERT ON outcome TO PUBLIC;
-- Captures prompts first..last in order, each in a subtransaction, and
-- records what each did: its artifact, or its SQLSTATE and message.
CREATE FUNCTION pg_temp.capture_each(batch text, first int, last int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  p record;
  stored text;
BEGIN
  FOR p IN SELECT * FROM prompt WHERE prompt.n BETWEEN first AND last ORDER BY prompt.n LOOP
    BEGIN
      stored := public.kvg_capture(p.text);
      INSERT INTO outcome VALUES (batch, p.n, stored, NULL, NULL);
    EXCEPTION WHEN OTHERS THEN
      INSERT INTO outcome VALUES (batch, p.n, NULL, SQLSTATE, SQLERRM);
    END;
  END LOOP;
END $$;
CREATE FUNCTION pg_temp.usage(who text) RETURNS bigint LANGUAGE sql AS $$
  SELECT coalesce((SELECT u.bytes FROM kvg.storage_usage u WHERE u.role = who), 0)
$$;
-- The running total the writer checks (kvg.storage_accounts, plus what it
-- has not folded in yet): it must be what the charges add up to.
CREATE FUNCTION pg_temp.counted(who text) RETURNS bigint LANGUAGE sql AS $$
  SELECT coalesce((SELECT s.bytes FROM kvg.storage_accounts s WHERE s.role = who), 0)
         + coalesce((SELECT sum(j.bytes) FROM kvg.storage_adjustments j WHERE j.role = who), 0)::bigint
$$;

-- 1. SET ROLE opens no new bucket: the session user pays -----------------------------------

SET kvg.storage_quota = '64kB';
SET SESSION AUTHORIZATION :"payer";
SET ROLE :"grp";
SELECT public.kvg_capture(text) AS first FROM prompt WHERE n = 0 \gset
RESET ROLE;
RESET SESSION AUTHORIZATION;
SELECT is(ARRAY(SELECT role::text FROM kvg.storage_charges WHERE sha256 = :'first'), ARRAY[:'payer'],
          'a capture after SET ROLE is charged to the session user, not to the role set');
SELECT is(a.role::text || ' / ' || a.session_role::text, :'grp' || ' / ' || :'payer',
          'its audit row names the current user and the session user')
FROM kvg.audit a WHERE a.operation = 'capture' AND a.artifact_sha256 = :'first' ORDER BY a.seq DESC LIMIT 1;

-- 2. Twelve long captures under a 64 kB quota -----------------------------------------------

SET SESSION AUTHORIZATION :"payer";
SELECT pg_temp.capture_each('twelve', 1, 12);
RESET SESSION AUTHORIZATION;
SELECT count(*) FILTER (WHERE artifact IS NOT NULL) AS stored, count(*) FILTER (WHERE state = '53400') AS refused
FROM outcome WHERE batch = 'twelve' \gset
SELECT bytes AS first_size FROM kvg.artifacts WHERE sha256 = :'first' \gset
SELECT cmp_ok((SELECT 12 * min(a.bytes) FROM kvg.artifacts a
               WHERE a.sha256 IN (SELECT artifact FROM outcome WHERE batch = 'twelve')), '>', 65536::bigint,
              'the twelve captures would store far more than 64 kB unbounded');
SELECT cmp_ok(:stored::bigint, '>=', 1::bigint, 'what fits the quota is stored (' || :stored || ' of 12)');
SELECT is(:stored::bigint + :refused::bigint, 12::bigint, 'the rest are refused with 53400, nothing else');
SELECT cmp_ok(pg_temp.usage(:'payer'), '<=', 65536::bigint,
              'the role stays within its 64 kB quota (' || pg_temp.usage(:'payer') || ' bytes): not even one artifact past it');
SELECT is(pg_temp.usage(:'payer'),
          (SELECT sum(a.bytes)::bigint FROM kvg.artifacts a
           WHERE a.sha256 IN (SELECT artifact FROM outcome WHERE batch = 'twelve') OR a.sha256 = :'first'),
          'kvg.storage_usage shows what its captures stored');
SELECT ok(strpos(message, format('of role %s (65536 bytes, %s used)', :'payer', pg_temp.usage(:'payer'))) > 0,
          'the refusal names the role, the quota and the usage: ' || message)
FROM outcome WHERE batch = 'twelve' AND state = '53400' ORDER BY n DESC LIMIT 1;
SELECT is(pg_temp.counted(:'payer'), pg_temp.usage(:'payer'), 'the total the writer checks is the charges'' sum');
SELECT is((SELECT count(*) FROM kvg.storage_usage WHERE role = :'grp'), 0::bigint, 'the group role has no bucket');

SET SESSION AUTHORIZATION :"payer";
SET ROLE :"grp";
SELECT throws_like((SELECT format('SELECT public.kvg_capture(%L)', text) FROM prompt WHERE n = 13),
                   '%of role ' || :'payer' || ' (65536 bytes%',
                   'SET ROLE to another role does not get past the session user''s quota');
RESET ROLE;
SELECT lives_ok((SELECT format('SELECT public.kvg_capture(%L)', text) FROM prompt WHERE n = 0),
                'storing what the role stored already costs nothing, and is not refused at its quota');
RESET SESSION AUTHORIZATION;
SELECT is(pg_temp.usage(:'payer'),
          (SELECT sum(a.bytes)::bigint FROM kvg.artifacts a
           WHERE a.sha256 IN (SELECT artifact FROM outcome WHERE batch = 'twelve') OR a.sha256 = :'first'),
          'and charges nothing');

-- 3. Imports, learns and answers' chain links are charged -----------------------------------

SELECT artifact AS second FROM outcome WHERE batch = 'twelve' AND artifact IS NOT NULL ORDER BY n LIMIT 1 \gset
SELECT kvg_export(:'first') AS first_bytes, kvg_export(:'second') AS second_bytes \gset
SET kvg.storage_quota = '10MB';
SET SESSION AUTHORIZATION :"librarian";
SELECT kvg_import(:'first_bytes', verify => false) \g /dev/null
RESET SESSION AUTHORIZATION;
SELECT is((SELECT bytes FROM kvg.storage_charges WHERE role = :'librarian' AND sha256 = :'first'), :first_size::bigint,
          'an import is charged its size, also when another role stored the same bytes first');

\set question 'Where did Lily find the shiny red ball, run ' :tag '?'
SET SESSION AUTHORIZATION :"librarian";
SELECT public.kvg_learn(:'question', 'contains', 'Lily went to the park of run ' || :'tag' ||
                        '. In the park, Lily found a shiny red ball.', 'park') AS entry \gset
RESET SESSION AUTHORIZATION;
SELECT artifact_sha256 AS learned FROM kvg.knowledge WHERE id = :entry \gset
SELECT ok(EXISTS (SELECT FROM kvg.storage_charges WHERE role = :'librarian' AND sha256 = :'learned'),
          'a learn is charged to its session user');
SELECT artifacts AS charged_before FROM kvg.storage_usage WHERE role = :'librarian' \gset
SET SESSION AUTHORIZATION :"librarian";
SELECT mode AS answer_mode FROM public.kvg_answer_detail('Lily found the shiny red ball of run ' || :'tag' || ' in the', 4) \gset
RESET SESSION AUTHORIZATION;
SELECT is(:'answer_mode'::text, 'transfer', 'a related question is answered in transfer mode');
SELECT is((SELECT artifacts FROM kvg.storage_usage WHERE role = :'librarian'), :charged_before::bigint + 1,
          'which stores its composition as a chain link, charged to the asker');

SET kvg.storage_quota = '1kB';
SET SESSION AUTHORIZATION :"librarian";
SELECT throws_like(format('SELECT kvg_import(%L::bytea, verify => false)', :'second_bytes'),
                   '%would exceed the kvg.storage_quota of role ' || :'librarian' || ' (1024 bytes, %',
                   'an import past the quota is refused, also of bytes another role stored');
SELECT lives_ok(format('SELECT kvg_import(%L::bytea, verify => false)', :'first_bytes'),
                'an import of bytes the role stored already is not');
RESET SESSION AUTHORIZATION;
RESET kvg.storage_quota;

-- 3b. What an answer composes from the library is the library's (promise 7) ----------------
-- Over two entries, an answer stores the second entry's solution after the
-- first (a new link: other positions) and the question after both. Before,
-- the asker paid for both (~40 kB and ~67 kB with the vendored model), so an
-- 80 kB quota refused the answer with 53400, though a cold answer needs no
-- quota at all; now the composed link is the library's, under
-- kvg.library_storage_quota, past which nothing is stored and the question
-- is answered all the same.
SELECT 'tap_quota_asker_' || :'tag' AS asker \gset
CREATE ROLE :"asker" IN ROLE kvg_user;
SET SESSION AUTHORIZATION :"librarian";
SELECT public.kvg_learn(format('Where did Tom hide the blue key of run %s?', :'tag'), 'contains',
                        format('Tom hid the blue key of run %s under the old mat by the door.', :'tag'), 'mat')
\g /dev/null
SELECT public.kvg_learn(format('Where did Tom put the blue box of run %s?', :'tag'), 'contains',
                        format('Tom put the blue box of run %s on the tall shelf in the hall.', :'tag'), 'shelf')
\g /dev/null
RESET SESSION AUTHORIZATION;
\set composed 'Tom hid the blue key of run ' :tag ' and put the blue box in the'
SELECT count(*) AS library_before FROM kvg.storage_charges WHERE role = '(library)' \gset
SET kvg.library_storage_quota = '1kB';
SET SESSION AUTHORIZATION :"asker";
SELECT is(mode, 'transfer', 'past kvg.library_storage_quota, a question over two entries is still answered')
FROM public.kvg_answer_detail(:'composed', 4);
RESET SESSION AUTHORIZATION;
SELECT is((SELECT count(*) FROM kvg.storage_charges WHERE role = '(library)'), :library_before::bigint,
          'and stores no link the library would pay for');
SELECT is((SELECT count(*) FROM kvg.storage_charges WHERE role = :'asker'), 0::bigint,
          'nor the question''s, which would continue it');
RESET kvg.library_storage_quota;
SET kvg.storage_quota = '80kB';
SET SESSION AUTHORIZATION :"asker";
SELECT is(mode, 'transfer',
          'under a quota too small for the composed link and the question''s together, the asker is answered')
FROM public.kvg_answer_detail(:'composed', 4);
RESET SESSION AUTHORIZATION;
RESET kvg.storage_quota;
SELECT is((SELECT count(*) FROM kvg.storage_charges WHERE role = '(library)'), :library_before::bigint + 1,
          'the link composed from the second entry is charged to the library');
SELECT is((SELECT count(*) FROM kvg.storage_charges WHERE role = :'asker'), 1::bigint,
          'the question''s own link to the asker');
SELECT cmp_ok((SELECT bytes FROM kvg.storage_usage WHERE role = :'asker'), '<=', 80 * 1024::bigint,
              'within its quota');
-- A template of the asker's own puts text of hers into every link of the
-- composition: then they are all hers, and the library pays for none.
SELECT count(*) AS library_before FROM kvg.storage_charges WHERE role = '(library)' \gset
SET SESSION AUTHORIZATION :"asker";
SELECT set_config('kvg.knowledge_template', 'The asker''s own notes.' || E'\n{solution}\nQuestion: {question}\nAnswer:',
                  false) \g /dev/null
SELECT is(mode, 'transfer', 'with a template of her own, the asker is answered over the two entries')
FROM public.kvg_answer_detail(:'composed', 4);
RESET kvg.knowledge_template;
RESET SESSION AUTHORIZATION;
SELECT is((SELECT count(*) FROM kvg.storage_charges WHERE role = '(library)'), :library_before::bigint,
          'and the library pays for no link of it');
SELECT is((SELECT count(*) FROM kvg.storage_charges WHERE role = :'asker'), 4::bigint,
          'the asker pays for all three: her template is in them');

-- 4. Deleting an artifact uncharges it ------------------------------------------------------

SELECT pg_temp.usage(:'payer') AS payer_before, pg_temp.usage(:'librarian') AS librarian_before \gset
SELECT cmp_ok(kvg_artifact_delete(:'first'), '>', 0::bigint, 'kvg_artifact_delete deletes an artifact two roles stored');
SELECT is(pg_temp.usage(:'payer'), (:payer_before - :first_size)::bigint, 'it is no longer charged to the one');
SELECT is(pg_temp.usage(:'librarian'), (:librarian_before - :first_size)::bigint, 'nor to the other');
-- Stored again in this transaction, which deleted it: the writer sees it
-- stored, so the call stores it itself (docs/audit-chain.md, step 3).
SET SESSION AUTHORIZATION :"payer";
SELECT is(public.kvg_capture(text), :'first', 'the role stores the deleted bytes again') FROM prompt WHERE n = 0;
RESET SESSION AUTHORIZATION;
SELECT is(pg_temp.usage(:'payer'), :payer_before::bigint, 'and is charged them again');
SELECT ok(EXISTS (SELECT FROM kvg.storage_adjustments WHERE role = :'payer' AND bytes = :first_size),
          'by its own transaction, as an adjustment for the writer to fold in');
SELECT is(pg_temp.counted(:'payer') || ' ' || pg_temp.counted(:'librarian'),
          pg_temp.usage(:'payer') || ' ' || pg_temp.usage(:'librarian'),
          'releases and a store outside the writer keep the total the charges'' sum');

-- 5. A second role, its quota set with ALTER ROLE, in two sessions at once ----------------
-- Its sessions commit; the role and what they stored are removed at the end.

SELECT pg_temp.connect('admin') \g /dev/null
SELECT dblink_exec('admin', format('CREATE ROLE %I LOGIN IN ROLE kvg_user', :'racer')),
       dblink_exec('admin', format('ALTER ROLE %I SET kvg.storage_quota = %L', :'racer', '64kB')),
       dblink_exec('admin', format('ALTER ROLE %I SET kvg.model = %L', :'racer', :'small')),
       dblink_exec('admin', format('ALTER ROLE %I SET kvg.device = cpu', :'racer')) \g /dev/null
SELECT dblink_connect(c, format('dbname=%s host=%s port=%s user=%s', current_database(),
                                current_setting('unix_socket_directories'), current_setting('port'), :'racer'))
FROM unnest(ARRAY['r1', 'r2']) c \g /dev/null
SELECT is((SELECT q FROM dblink('r1', 'SHOW kvg.storage_quota') AS t(q text)), '64kB',
          'ALTER ROLE ... SET kvg.storage_quota is the role''s quota from its next login');

-- kvg_vacuum uncharges what a rolled-back capture left.
SELECT dblink_exec('r1', 'BEGIN') \g /dev/null
SELECT r AS dropped FROM dblink('r1', (SELECT format('SELECT public.kvg_capture(%L)', text) FROM prompt WHERE n = 40))
  AS t(r text) \gset
SELECT dblink_exec('r1', 'ROLLBACK') \g /dev/null
SELECT ok(EXISTS (SELECT FROM kvg.storage_charges WHERE role = :'racer' AND sha256 = :'dropped'),
          'a rolled-back capture''s artifact stays charged while it is stored');
SELECT public.kvg_vacuum() \g /dev/null
SELECT ok(NOT EXISTS (SELECT FROM kvg.storage_charges WHERE sha256 = :'dropped'),
          'kvg_vacuum collects it and uncharges it');

-- Twelve more long captures, six in each session, at the same time.
CREATE FUNCTION pg_temp.capture_batch(first int, last int) RETURNS text LANGUAGE sql AS $body$
  SELECT format($f$DO $d$
    DECLARE p text;
    BEGIN
      FOREACH p IN ARRAY %L::text[] LOOP
        BEGIN
          PERFORM public.kvg_capture(p);
        EXCEPTION WHEN configuration_limit_exceeded THEN NULL;
        END;
      END LOOP;
    END $d$$f$, ARRAY(SELECT text FROM prompt WHERE n BETWEEN first AND last ORDER BY n))
$body$;
SELECT dblink_send_query('r1', pg_temp.capture_batch(21, 26)), dblink_send_query('r2', pg_temp.capture_batch(31, 36))
\g /dev/null
SELECT is(array_agg(s), ARRAY['DO', 'DO'], 'both sessions finish, refused only by the quota')
FROM (SELECT s FROM dblink_get_result('r1') AS t(s text)
      UNION ALL SELECT s FROM dblink_get_result('r2') AS t(s text)) r;
SELECT * FROM dblink_get_result('r1') AS t(s text) UNION ALL SELECT * FROM dblink_get_result('r2') AS t(s text)
\g /dev/null
SELECT count(*) AS raced FROM kvg.storage_charges WHERE role = :'racer' \gset
SELECT cmp_ok(:raced::bigint, '<', 12::bigint, 'some of the twelve were refused (' || :raced || ' stored)');
-- As the writer sees it: with the charge this transaction's kvg_vacuum
-- removed, uncommitted.
SELECT u AS racer_usage FROM dblink('admin', format('SELECT bytes FROM kvg.storage_usage WHERE role = %L', :'racer'))
  AS t(u bigint) \gset
SELECT cmp_ok(:racer_usage::bigint, '<=', 65536::bigint,
              'two sessions of one role at once stay within its quota (' || :racer_usage || ' bytes)');
SELECT is(pg_temp.counted(:'racer'), pg_temp.usage(:'racer'), 'and its total is its charges'' sum');
SELECT is(pg_temp.usage(:'racer'),
          (SELECT sum(a.bytes)::bigint FROM kvg.artifacts a
           WHERE a.sha256 IN (SELECT c.sha256 FROM kvg.artifact_claims c WHERE c.claimed_by = :'racer')),
          'kvg.storage_usage shows what its committed captures stored');

SELECT dblink_disconnect(c) FROM unnest(ARRAY['r1', 'r2']) c \g /dev/null
-- What others store, even its size, is theirs.
SELECT cmp_ok((SELECT count(*) FROM kvg.storage_usage WHERE role <> :'racer'), '>', 0::bigint,
              'other roles have usage');
SET SESSION AUTHORIZATION :"racer";
SELECT is(array_agg(role::text), ARRAY[:'racer'], 'a user sees its own usage and no other role''s')
FROM kvg.storage_usage;
RESET SESSION AUTHORIZATION;
-- Not the one this transaction's kvg_vacuum holds (deleted, uncommitted).
SELECT sum(d) AS freed FROM dblink('admin', format(
  'SELECT public.kvg_artifact_delete(sha256)::text FROM kvg.storage_charges WHERE role = %L AND sha256 <> %L',
  :'racer', :'dropped')) AS t(d bigint)
\gset
SELECT is(pg_temp.usage(:'racer'), 0::bigint, 'deleting its artifacts (' || :freed || ' bytes) uncharges the role');
SELECT dblink_exec('admin', format('DROP ROLE %I', :'racer')) \g /dev/null
SELECT dblink_disconnect('admin') \g /dev/null

SELECT * FROM finish();
ROLLBACK;
