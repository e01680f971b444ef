-- Function verifiers are frozen at deposit, run isolated and unprivileged
-- (docs/security.md, promise 8):
--  1. at deposit the verifier and every function it reaches are copied into
--     kvg_frozen, which only the extension's owner may change; answers run
--     the copy as kvg_verifier (session and current user), never as the
--     asker, the depositor or a superuser, so nothing its depositor (or the
--     owner of a callee) does after the deposit (CREATE OR REPLACE, DROP,
--     1,000 swaps during asks) changes a verdict or runs unfrozen code;
--  2. it runs in a session of its own: alice's custom setting, prepared
--     statement, cursor and advisory locks are out of its reach;
--  3. the asker's quote_all_identifiers does not change the pin, and an
--     overload next to the verifier does not make its call ambiguous;
--  4. kvg.verifier_timeout bounds it: it fails closed in about that time;
--     the asker's own statement_timeout cancels its wait and stops the worker;
--  5. what a pure function of question and answer does not need is refused
--     at deposit, by name: code that cannot be followed (plpgsql, a
--     non-atomic SQL body, dynamic SQL), SECURITY DEFINER, SET clauses,
--     tables, a user's text-search configuration, names looked up at run
--     time; and a verifier that calls itself cannot be frozen;
--  6. a privilege granted to kvg_verifier (a depositor's GRANT on her own
--     table) makes every function verifier fail closed until it is revoked.
-- The workers are other sessions: they see only committed functions, so
-- they are created through dblink (which commits) and dropped at the end;
-- the frozen copies are committed by the freeze itself; the entries and
-- everything else are rolled back with this transaction.
BEGIN;
SELECT plan(56);
\getenv data KVG_TEST_DATA
\set small :data '/models/stories260K.gguf'
SELECT set_config('kvg.model', :'small', true) \g /dev/null
SELECT set_config('kvg.device', 'cpu', true) \g /dev/null

CREATE FUNCTION pg_temp.committed(statements text) RETURNS text LANGUAGE sql AS $$
  SELECT dblink_exec(format('dbname=%s host=%s port=%s user=%s', current_database(),
                            current_setting('unix_socket_directories'), current_setting('port'), current_user),
                     statements)
$$;
-- The verdict on an answer to `question` (a recurring answer, checked with its entry's verifier).
CREATE FUNCTION pg_temp.verdict(question text) RETURNS boolean LANGUAGE sql AS $$
  SELECT verified FROM public.kvg_answer_detail(question, 4)
$$;
-- Mallory's replacement of one of her functions: harmless until a superuser runs it.
CREATE FUNCTION pg_temp.escalating(signature text, result_type text, result text) RETURNS text LANGUAGE sql AS $$
  SELECT format($sql$
    SET ROLE tap_iso_mallory;
    CREATE OR REPLACE FUNCTION %s RETURNS %s LANGUAGE plpgsql AS $f$
    BEGIN
      IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        EXECUTE 'ALTER ROLE tap_iso_mallory SUPERUSER';
      END IF;
      RETURN %s;
    END
    $f$;
  $sql$, signature, result_type, result)
$$;
-- Leftovers of a run that stopped half-way (the role may still own objects
-- in that run's database: it is reused, never left a superuser).
SELECT pg_temp.committed($sql$
  DROP SCHEMA IF EXISTS tap_iso_m, tap_iso_admin CASCADE;
  DO $$
  BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'tap_iso_mallory') THEN
      CREATE ROLE tap_iso_mallory;
    END IF;
  END
  $$;
  ALTER ROLE tap_iso_mallory NOSUPERUSER;
  GRANT kvg_author TO tap_iso_mallory;
  CREATE SCHEMA tap_iso_m AUTHORIZATION tap_iso_mallory;
  CREATE SCHEMA tap_iso_admin;
  GRANT USAGE ON SCHEMA tap_iso_m, tap_iso_admin TO PUBLIC;
  SET ROLE tap_iso_mallory;
  CREATE FUNCTION tap_iso_m.normalize(a text) RETURNS text LANGUAGE sql RETURN lower(btrim(a));
  CREATE FUNCTION tap_iso_m.accept(q text, a text) RETURNS boolean LANGUAGE sql RETURN true;
  -- A callee swapped back and forth while alice asks; its other self
  -- counts every run in a sequence that no rollback undoes.
  CREATE SEQUENCE tap_iso_m.ran;
  GRANT USAGE ON SEQUENCE tap_iso_m.ran TO PUBLIC;
  CREATE FUNCTION tap_iso_m.tick(a text) RETURNS text LANGUAGE sql RETURN lower(a);
  CREATE FUNCTION tap_iso_m.ticks(q text, a text) RETURNS boolean LANGUAGE sql RETURN tap_iso_m.tick(a) IS NOT NULL;
  CREATE PROCEDURE tap_iso_m.swap(n integer) LANGUAGE plpgsql AS $p$
  BEGIN
    FOR i IN 1..n LOOP
      CREATE OR REPLACE FUNCTION tap_iso_m.tick(a text) RETURNS text LANGUAGE plpgsql AS $f$
      BEGIN
        PERFORM nextval('tap_iso_m.ran');
        RETURN lower(a);
      END
      $f$;
      COMMIT;
      CREATE OR REPLACE FUNCTION tap_iso_m.tick(a text) RETURNS text LANGUAGE sql RETURN lower(a);
      COMMIT;
    END LOOP;
  END
  $p$;
  -- Her own table, which she may grant on to anyone.
  CREATE TABLE tap_iso_m.flag (on_ boolean);
  RESET ROLE;
  -- The superuser's verifier calls mallory's function.
  CREATE FUNCTION tap_iso_admin.check(q text, a text) RETURNS boolean LANGUAGE sql
  BEGIN ATOMIC
    SELECT tap_iso_m.normalize(a) <> '';
  END;
  CREATE FUNCTION tap_iso_admin.whoami(q text, a text) RETURNS boolean LANGUAGE sql
    RETURN current_user = 'kvg_verifier' AND session_user = 'kvg_verifier';
  -- Reaches for the asker's session: passes only when it finds nothing of hers.
  CREATE FUNCTION tap_iso_admin.snoop(q text, a text) RETURNS boolean LANGUAGE sql
  BEGIN ATOMIC
    SELECT pg_advisory_unlock_all();
    SELECT pg_advisory_lock(4242);
    SELECT coalesce(current_setting('app.secret', true), '') = ''
           AND NOT EXISTS (SELECT FROM pg_prepared_statement())
           AND NOT EXISTS (SELECT FROM pg_cursor());
  END;
  -- Reads the asker's cursor (except for the deposit's own answer).
  CREATE FUNCTION tap_iso_admin.drain(q text, a text) RETURNS boolean LANGUAGE sql
    RETURN CASE WHEN a = 'yes' THEN true ELSE cursor_to_xml('tap_iso_cur', 5, false, false, '') IS NOT NULL END;
  -- Sleeps a minute for any answer but the deposited one.
  CREATE FUNCTION tap_iso_admin.slow(q text, a text) RETURNS boolean LANGUAGE sql
  BEGIN ATOMIC
    SELECT pg_sleep(CASE WHEN a = 'lasts' THEN 0 ELSE 60 END);
    SELECT true;
  END;
$sql$) \g /dev/null

CREATE ROLE tap_iso_alice IN ROLE kvg_user;

-- The role ---------------------------------------------------------------------------
SELECT ok(NOT rolcanlogin AND NOT rolsuper,
          'kvg_verifier exists, cannot log in and is no superuser')
FROM pg_roles WHERE rolname = 'kvg_verifier';
SELECT is((SELECT count(*) FROM pg_auth_members WHERE member = 'kvg_verifier'::regrole), 0::bigint,
          'kvg_verifier is a member of no role');

-- 1. Frozen at deposit: a callee changed under a superuser's verifier ----------------------
SELECT kvg_learn('Who checks the tap check?', 'tap_iso_admin.check', 'The tap check checks yes.', 'yes') AS check_entry
\gset
SELECT verifier_frozen AS check_copy, verifier_pin AS check_pin FROM kvg.knowledge WHERE id = :check_entry \gset
SELECT ok(:'check_copy' ~ '^kvg_frozen\.v_[0-9a-f]{40}$', 'the entry names its frozen copy in kvg_frozen');
SELECT is(kvg.function_pin((:'check_copy' || '(text, text)')::regprocedure), :'check_pin',
          'and is pinned to the copy''s kvg.function_pin');
SELECT is(verifier, 'tap_iso_admin."check"'::text, 'the verifier is stored by its schema-qualified name')
FROM kvg.knowledge WHERE id = :check_entry;
SELECT ok(p.proowner = n.nspowner AND NOT has_schema_privilege('tap_iso_mallory', n.oid, 'CREATE')
          AND NOT has_schema_privilege('kvg_user', n.oid, 'USAGE'),
          'the copy belongs to the extension''s owner, in a schema no user may create in')
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE p.oid = (:'check_copy' || '(text, text)')::regprocedure;
SELECT is((SELECT count(*) FROM kvg.verifier_copies((:'check_copy' || '(text, text)')::regprocedure) c
           JOIN pg_proc p ON p.oid = c.function WHERE p.pronamespace = 'kvg_frozen'::regnamespace),
          2::bigint, 'the copy calls a copy of mallory''s callee');
SELECT is((SELECT count(*) FROM kvg.verifier_copies((:'check_copy' || '(text, text)')::regprocedure) c
           JOIN pg_proc p ON p.oid = c.function WHERE p.pronamespace <> 'kvg_frozen'::regnamespace),
          0::bigint, 'and nothing of anyone''s outside kvg_frozen');
SELECT kvg_learn('Who checks the tap check twice?', 'tap_iso_admin.check', 'The tap check checks yes.', 'yes') AS twice
\gset
SELECT is(verifier_frozen, :'check_copy', 'the same function frozen again is the same copy')
FROM kvg.knowledge WHERE id = :twice;
SET ROLE tap_iso_alice;
SELECT is(pg_temp.verdict('Who checks the tap check?'), true,
          'alice''s answer is verified by the frozen copy of the superuser''s verifier');
RESET ROLE;
SELECT pg_temp.committed(pg_temp.escalating('tap_iso_m.normalize(a text)', 'text', 'lower(btrim(a))')) \g /dev/null
SELECT is(kvg.function_pin((:'check_copy' || '(text, text)')::regprocedure), :'check_pin',
          'mallory''s change of the callee leaves the copy''s pin as it was');
SET ROLE tap_iso_alice;
SELECT is(pg_temp.verdict('Who checks the tap check?'), true,
          'and changes nothing: alice''s answer is verified by the copy');
RESET ROLE;
SELECT is((SELECT rolsuper FROM pg_roles WHERE rolname = 'tap_iso_mallory'), false,
          'mallory''s replacement never ran: she is no superuser');
SELECT is(verified, true, 'the audit row records the verified answer')
FROM kvg.audit WHERE operation = 'answer' ORDER BY seq DESC LIMIT 1;

-- Mallory's own verifier, rewritten after deposit (was 07_security.sql).
SET ROLE tap_iso_mallory;
SELECT kvg_learn('What did the tap dog do?', 'tap_iso_m.accept', 'The tap dog bit the girl.', 'bit') AS dog_entry \gset
SELECT verifier_frozen AS dog_copy FROM kvg.knowledge WHERE id = :dog_entry \gset
SELECT throws_ok(format('ALTER FUNCTION %s(text, text) RENAME TO v_mine', :'dog_copy'), '42501', NULL,
                 'mallory may not alter the frozen copy of her own verifier');
SELECT throws_ok(format('CREATE OR REPLACE FUNCTION %s(q text, a text) RETURNS boolean LANGUAGE sql RETURN false',
                        :'dog_copy'), '42501', NULL, 'nor replace it');
RESET ROLE;
SELECT pg_temp.committed(pg_temp.escalating('tap_iso_m.accept(q text, a text)', 'boolean', 'true')) \g /dev/null
SELECT is(pg_temp.verdict('What did the tap dog do?'), true,
          'a verifier rewritten after deposit changes nothing, asked by a superuser: its copy answers');
SELECT is((SELECT rolsuper FROM pg_roles WHERE rolname = 'tap_iso_mallory'), false,
          'and the rewrite did not run: its depositor did not become a superuser');

-- 1,000 swaps of a callee while alice asks: not one run of the swapped-in code.
SET ROLE tap_iso_mallory;
SELECT kvg_learn('How does the tap clock tick?', 'tap_iso_m.ticks', 'The tap clock ticks.', 'ticks') \g /dev/null
RESET ROLE;
SELECT dblink_connect('tap_iso_swapper', format('dbname=%s host=%s port=%s user=%s', current_database(),
                      current_setting('unix_socket_directories'), current_setting('port'), current_user)) \g /dev/null
SELECT dblink_exec('tap_iso_swapper', 'SET ROLE tap_iso_mallory') \g /dev/null
SELECT dblink_send_query('tap_iso_swapper', 'CALL tap_iso_m.swap(1000)') \g /dev/null
CREATE FUNCTION pg_temp.asks_while_swapping() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  asked integer := 0;
BEGIN
  LOOP
    IF pg_temp.verdict('How does the tap clock tick?') IS DISTINCT FROM true THEN
      RETURN -1;
    END IF;
    asked := asked + 1;
    EXIT WHEN dblink_is_busy('tap_iso_swapper') = 0;
  END LOOP;
  RETURN asked;
END
$$;
SET ROLE tap_iso_alice;
SELECT ok(pg_temp.asks_while_swapping() > 0, 'every answer alice asked for during 1,000 swaps is verified');
RESET ROLE;
SELECT is(r, 'CALL', 'the 1,000 swaps all committed') FROM dblink_get_result('tap_iso_swapper') AS t(r text);
SELECT dblink_disconnect('tap_iso_swapper') \g /dev/null
SELECT is((SELECT is_called FROM tap_iso_m.ran), false, 'and the swapped-in callee never ran');

-- Who it runs as: kvg_verifier, whoever deposited and whoever asks.
SELECT kvg_learn('Who runs the tap verifier?', 'tap_iso_admin.whoami', 'The tap verifier runs.', 'runs') \g /dev/null
SET ROLE tap_iso_alice;
SELECT is(pg_temp.verdict('Who runs the tap verifier?'), true,
          'asked by alice, the superuser''s verifier runs with kvg_verifier as session and current user');
RESET ROLE;
SELECT is(pg_temp.verdict('Who runs the tap verifier?'), true,
          'asked by a superuser, it runs as kvg_verifier too');

-- 6. Rights granted to kvg_verifier make verifiers fail closed.
SELECT pg_temp.committed('SET ROLE tap_iso_mallory; GRANT SELECT ON tap_iso_m.flag TO kvg_verifier') \g /dev/null
SET ROLE tap_iso_alice;
SET client_min_messages = error;
SELECT is(pg_temp.verdict('Who runs the tap verifier?'), false,
          'while mallory grants kvg_verifier SELECT on her table, every function verifier fails closed');
RESET client_min_messages;
RESET ROLE;
SELECT pg_temp.committed('SET ROLE tap_iso_mallory; REVOKE SELECT ON tap_iso_m.flag FROM kvg_verifier') \g /dev/null
SET ROLE tap_iso_alice;
SELECT is(pg_temp.verdict('Who runs the tap verifier?'), true, 'and runs again once she revokes it');
RESET ROLE;

-- 3. The asker's settings and an overload change nothing.
SET ROLE tap_iso_alice;
SET quote_all_identifiers = on;
SELECT is(pg_temp.verdict('Who runs the tap verifier?'), true,
          'alice''s quote_all_identifiers = on does not change the pin');
RESET quote_all_identifiers;
RESET ROLE;
SELECT pg_temp.committed($$
  CREATE FUNCTION tap_iso_admin.whoami(q text, a text, extra integer DEFAULT 0) RETURNS boolean LANGUAGE sql
    RETURN false;
$$) \g /dev/null
SET ROLE tap_iso_alice;
SELECT is(pg_temp.verdict('Who runs the tap verifier?'), true,
          'an overload that would make a call by name ambiguous does not: it is called by OID');
RESET ROLE;

-- 2. The asker's session is out of reach ----------------------------------------------
SELECT kvg_learn('What does the tap snoop see?', 'tap_iso_admin.snoop', 'The tap snoop sees.', 'sees') \g /dev/null
SELECT kvg_learn('What does the tap drain read?', 'tap_iso_admin.drain', 'The tap drain reads.', 'yes') \g /dev/null
SET ROLE tap_iso_alice;
SET app.secret = 'hunter2';
PREPARE tap_iso_stmt AS SELECT 1;
DECLARE tap_iso_cur CURSOR FOR SELECT generate_series(1, 100) AS n;
SELECT pg_advisory_lock(7) \g /dev/null
SELECT is(pg_temp.verdict('What does the tap snoop see?'), true,
          'alice asks; the snooping verifier sees nothing of hers: no secret, no prepared statement, no cursor');
SELECT is(current_setting('app.secret'), 'hunter2', 'alice''s setting is hers, unchanged');
SELECT is((SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND objid = 7),
          1::bigint, 'alice still holds her advisory lock');
SELECT is((SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND objid = 4242),
          0::bigint, 'and holds none planted by the verifier');
SET client_min_messages = error;
SELECT is(pg_temp.verdict('What does the tap drain read?'), false,
          'a verifier that reads alice''s cursor finds none: it fails closed');
RESET client_min_messages;
FETCH 1 FROM tap_iso_cur \gset fetched_
SELECT is(:fetched_n, 1, 'alice''s cursor is untouched: its next row is the first');
RESET ROLE;

-- 4. Bounded time -----------------------------------------------------------------------
SELECT kvg_learn('How long does the tap nap last?', 'tap_iso_admin.slow', 'The tap nap lasts.', 'lasts') \g /dev/null
SET kvg.verifier_timeout = '500ms';
SET ROLE tap_iso_alice;
SELECT clock_timestamp() AS nap_start \gset
SET client_min_messages = error;
SELECT is(pg_temp.verdict('How long does the tap nap last?'), false,
          'a verifier that sleeps past kvg.verifier_timeout fails closed');
RESET client_min_messages;
SELECT ok(clock_timestamp() - :'nap_start' BETWEEN interval '0.5 s' AND interval '8 s',
          'in about kvg.verifier_timeout, not the minute it would sleep');
RESET ROLE;
RESET kvg.verifier_timeout;

-- The asker's own statement_timeout reaches it while it waits; its worker is stopped.
CREATE FUNCTION pg_temp.no_verifier_left() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..100 LOOP
    PERFORM pg_stat_clear_snapshot();
    IF NOT EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'kvg verifier') THEN
      RETURN true;
    END IF;
    PERFORM pg_sleep(0.05);
  END LOOP;
  RETURN false;
END
$$;
SET kvg.verifier_timeout = '30s';
SET ROLE tap_iso_alice;
SELECT clock_timestamp() AS cancel_start \gset
SAVEPOINT before_cancel;  -- psql prints the cancel as an ERROR: expected
SET statement_timeout = '1s';
\set ON_ERROR_STOP 0
SELECT kvg_answer_detail('How long does the tap nap last?', 4);
\set ON_ERROR_STOP 1
ROLLBACK TO SAVEPOINT before_cancel;
SELECT is(:'LAST_ERROR_SQLSTATE'::text, '57014', 'the asker''s statement_timeout cancels its wait for the verifier');
SELECT ok(clock_timestamp() - :'cancel_start' < interval '10 s', 'in about its statement_timeout');
RESET ROLE;
RESET kvg.verifier_timeout;
SELECT ok(pg_temp.no_verifier_left(), 'and the verifier''s worker is stopped');

-- 5. What a pure function does not need is refused at deposit, by name ---------------------------
CREATE FUNCTION tap_iso_admin.dyn(q text, a text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  RETURN true;
END
$$;
SELECT throws_like($$SELECT kvg_learn('Is the tap dyn dynamic?', 'tap_iso_admin.dyn', 'It is.', 'is')$$,
                   '%reaches what a verifier may not%tap_iso_admin.dyn(text,text)%', 'a plpgsql verifier is refused by name');
SELECT throws_ok($$SELECT kvg_learn('Is the tap dyn dynamic?', 'tap_iso_admin.dyn', 'It is.', 'is')$$, '42P13', NULL,
                 'with SQLSTATE 42P13');
CREATE FUNCTION tap_iso_admin.old_style(q text, a text) RETURNS boolean LANGUAGE sql AS 'SELECT true';
SELECT throws_like($$SELECT kvg_learn('Is the tap body atomic?', 'tap_iso_admin.old_style', 'No.', 'no')$$,
                   '%reaches what a verifier may not%tap_iso_admin.old_style(text,text)%',
                   'so is an SQL function without a BEGIN ATOMIC or RETURN body');
CREATE FUNCTION tap_iso_admin.helper(a text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  RETURN a <> '';
END
$$;
CREATE FUNCTION tap_iso_admin.calls_helper(q text, a text) RETURNS boolean LANGUAGE sql
  RETURN tap_iso_admin.helper(a);
SELECT throws_like($$SELECT kvg_learn('Does the tap helper help?', 'tap_iso_admin.calls_helper', 'It helps.', 'helps')$$,
                   '%reaches what a verifier may not%tap_iso_admin.helper(text)%',
                   'an atomic verifier that calls a plpgsql function is refused, naming the callee');
CREATE FUNCTION tap_iso_admin.runs_text(q text, a text) RETURNS boolean LANGUAGE sql
  RETURN query_to_xml('SELECT ' || quote_literal(a), false, false, '') IS NOT NULL;
SELECT throws_like($$SELECT kvg_learn('Does the tap text run?', 'tap_iso_admin.runs_text', 'It runs.', 'runs')$$,
                   '%reaches what a verifier may not%tap_iso_admin.runs_text(text,text)%',
                   'dynamic SQL through a built-in (query_to_xml) is refused, naming the function that runs it');

CREATE FUNCTION tap_iso_admin.reads_any(q text, a text) RETURNS boolean LANGUAGE sql
  RETURN table_to_xml(a::regclass, false, false, '') IS NOT NULL;
SELECT throws_like($$SELECT kvg_learn('Does the tap table read?', 'tap_iso_admin.reads_any', 'It reads.', 'reads')$$,
                   '%reaches what a verifier may not%tap_iso_admin.reads_any(text,text)%',
                   'so is one that reads a relation chosen at run time (table_to_xml)');
CREATE FUNCTION tap_iso_admin.calls_c(q text, a text) RETURNS boolean LANGUAGE sql
  RETURN dblink_is_busy(a) = 0;
SELECT throws_like($$SELECT kvg_learn('Does the tap C call?', 'tap_iso_admin.calls_c', 'It calls.', 'calls')$$,
                   '%reaches what a verifier may not%dblink_is_busy(text)%',
                   'and one that calls an extension''s C function (dblink''s), naming it');

CREATE FUNCTION tap_iso_admin.definer(q text, a text) RETURNS boolean LANGUAGE sql SECURITY DEFINER RETURN true;
SELECT throws_like($$SELECT kvg_learn('Is the tap definer refused?', 'tap_iso_admin.definer', 'It is.', 'is')$$,
                   '%reaches what a verifier may not%tap_iso_admin.definer(text,text)%',
                   'a SECURITY DEFINER verifier is refused by name');
CREATE FUNCTION tap_iso_admin.configured(q text, a text) RETURNS boolean LANGUAGE sql SET work_mem = '1MB'
  RETURN true;
SELECT throws_like($$SELECT kvg_learn('Is the tap setting refused?', 'tap_iso_admin.configured', 'It is.', 'is')$$,
                   '%reaches what a verifier may not%tap_iso_admin.configured(text,text)%',
                   'so is one with a SET clause');
CREATE TABLE tap_iso_admin.answers (a text);
CREATE FUNCTION tap_iso_admin.reads_table(q text, a text) RETURNS boolean LANGUAGE sql
  RETURN EXISTS (SELECT FROM tap_iso_admin.answers t WHERE t.a = reads_table.a);
SELECT throws_like($$SELECT kvg_learn('Is the tap table read?', 'tap_iso_admin.reads_table', 'It is.', 'is')$$,
                   '%reaches what a verifier may not%table tap_iso_admin.answers%',
                   'one that reads a table is refused, naming the table');
CREATE TEXT SEARCH CONFIGURATION tap_iso_admin.words (COPY = pg_catalog.simple);
CREATE FUNCTION tap_iso_admin.own_words(q text, a text) RETURNS boolean LANGUAGE sql
  RETURN to_tsvector('tap_iso_admin.words', a) @@ to_tsquery('simple', 'is');
SELECT throws_like($$SELECT kvg_learn('Are the tap words own?', 'tap_iso_admin.own_words', 'It is.', 'is')$$,
                   '%reaches what a verifier may not%text search configuration tap_iso_admin.words%',
                   'one that uses a user''s text-search configuration is refused, naming it');
CREATE FUNCTION tap_iso_admin.named_words(q text, a text) RETURNS boolean LANGUAGE sql
  RETURN to_tsvector(q::regconfig, a) @@ to_tsquery('simple', 'is');
SELECT throws_like($$SELECT kvg_learn('Are the tap words named?', 'tap_iso_admin.named_words', 'It is.', 'is')$$,
                   '%reaches what a verifier may not%tap_iso_admin.named_words(text,text)%',
                   'so is one that looks a configuration up by name at run time');
SELECT pg_temp.committed($$
  CREATE FUNCTION tap_iso_admin.english_words(q text, a text) RETURNS boolean LANGUAGE sql
    RETURN to_tsvector('english', a) @@ plainto_tsquery('english', 'words');
$$) \g /dev/null
SELECT lives_ok($$SELECT kvg_learn('Which tap words count?', 'tap_iso_admin.english_words', 'Words count.', 'words')$$,
                'a verifier with a built-in text-search configuration is frozen');
SELECT pg_temp.committed($$
  CREATE FUNCTION tap_iso_admin.again(q text, a text) RETURNS boolean LANGUAGE sql RETURN true;
  CREATE OR REPLACE FUNCTION tap_iso_admin.again(q text, a text) RETURNS boolean LANGUAGE sql
    RETURN a = '' OR tap_iso_admin.again(q, '');
$$) \g /dev/null
SELECT throws_like($$SELECT kvg_learn('Does the tap verifier end?', 'tap_iso_admin.again', 'It ends.', 'ends')$$,
                   '%could not be frozen: it calls itself%', 'a verifier that calls itself cannot be frozen');

-- Only a superuser can change a copy; one it changed fails closed (it is not
-- what its name, a hash of its content, says, nor has its pin), until a
-- freeze of the same function makes it so again.
SELECT verifier_frozen AS whoami_copy FROM kvg.knowledge WHERE question = 'Who runs the tap verifier?' \gset
SELECT pg_temp.committed(format('CREATE OR REPLACE FUNCTION %s(q text, a text) RETURNS boolean LANGUAGE sql RETURN true',
                                :'whoami_copy')) \g /dev/null
SET client_min_messages = error;
SELECT is(pg_temp.verdict('Who runs the tap verifier?'), false, 'a copy a superuser replaced fails closed');
RESET client_min_messages;
SELECT kvg_learn('Who runs the tap verifier again?', 'tap_iso_admin.whoami', 'The tap verifier runs.', 'runs') AS again
\gset
SELECT is(verifier_frozen, :'whoami_copy', 'freezing the function again remakes the copy under its name')
FROM kvg.knowledge WHERE id = :again;
SELECT is(pg_temp.verdict('Who runs the tap verifier?'), true, 'and the entry''s answers are verified again');

-- 1 (end). A dropped verifier changes nothing either.
SELECT pg_temp.committed('DROP FUNCTION tap_iso_m.accept(text, text)') \g /dev/null
SELECT is(pg_temp.verdict('What did the tap dog do?'), true, 'a verifier dropped after deposit: its copy answers');

SELECT * FROM finish();
ROLLBACK;
SET client_min_messages = warning;
DROP SCHEMA tap_iso_m, tap_iso_admin CASCADE;
DROP ROLE tap_iso_mallory;
