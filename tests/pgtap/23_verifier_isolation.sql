-- Function verifiers run isolated and unprivileged, and their verdict comes
-- only from what was pinned (docs/security.md, promise 8):
--  1. a verifier runs as kvg_verifier, never as the asker, the depositor or
--     a superuser; a change to anything it reaches (its own body, a function
--     it calls, owned by another role) makes it fail closed, so mallory's
--     replaced callee never runs with a superuser's rights;
--  2. it runs in a session of its own: alice's custom setting, prepared
--     statement, cursor and advisory locks are out of its reach (what it
--     passes out through setval, which no rollback undoes, is nothing of
--     hers);
--  3. the asker's quote_all_identifiers does not change the pin, and an
--     overload next to the verifier does not make its call ambiguous;
--  4. kvg.verifier_timeout bounds it: it fails closed in about that time;
--     the asker's own statement_timeout cancels its wait and stops the worker;
--  5. a verifier that reaches code which cannot be pinned (plpgsql, a
--     non-atomic SQL body, dynamic SQL) is refused at deposit, by name.
-- The worker is another session: it sees only committed functions, so they
-- are created through dblink (which commits) and dropped at the end; the
-- entries and everything else are rolled back with this transaction.
BEGIN;
SELECT plan(36);
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
  RESET ROLE;
  -- The superuser's verifier calls mallory's function.
  CREATE FUNCTION tap_iso_admin.check(q text, a text) RETURNS boolean LANGUAGE sql
  BEGIN ATOMIC
    SELECT tap_iso_m.normalize(a) <> '';
  END;
  CREATE FUNCTION tap_iso_admin.whoami(q text, a text) RETURNS boolean LANGUAGE sql
    RETURN current_user = 'kvg_verifier';
  -- Reaches for the asker's session and passes what it finds out.
  CREATE SEQUENCE tap_iso_admin.leak;
  GRANT SELECT, UPDATE ON SEQUENCE tap_iso_admin.leak TO kvg_verifier;
  CREATE FUNCTION tap_iso_admin.snoop(q text, a text) RETURNS boolean LANGUAGE sql
  BEGIN ATOMIC
    SELECT pg_advisory_unlock_all();
    SELECT pg_advisory_lock(4242);
    SELECT setval('tap_iso_admin.leak', 1 + coalesce(length(current_setting('app.secret', true)), 0)
                  + 1000 * (SELECT count(*) FROM pg_prepared_statements)
                  + 100000 * (SELECT count(*) FROM pg_cursors));
    SELECT true;
  END;
  -- Reads the asker's cursor (except for the deposit's own answer).
  CREATE FUNCTION tap_iso_admin.drain(q text, a text) RETURNS boolean LANGUAGE sql
    RETURN CASE WHEN a = 'yes' THEN true ELSE cursor_to_xml('tap_iso_cur', 5, false, false, '') IS NOT NULL END;
  -- Sleeps as long as a table says (its rows are data, not pinned).
  CREATE TABLE tap_iso_admin.nap (seconds float8);
  INSERT INTO tap_iso_admin.nap VALUES (0);
  GRANT SELECT ON tap_iso_admin.nap TO kvg_verifier;
  CREATE FUNCTION tap_iso_admin.slow(q text, a text) RETURNS boolean LANGUAGE sql
  BEGIN ATOMIC
    SELECT pg_sleep(seconds) FROM tap_iso_admin.nap;
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

-- 1. Rights, and a callee changed under a superuser's verifier -------------------------
SELECT kvg_learn('Who checks the tap check?', 'tap_iso_admin.check', 'The tap check checks yes.', 'yes') AS check_entry
\gset
SELECT kvg.function_pin('tap_iso_admin.check(text, text)'::regprocedure) AS check_pin \gset
SELECT is(verifier_pin, :'check_pin', 'the entry is pinned to kvg.function_pin') FROM kvg.knowledge
WHERE id = :check_entry;
SELECT is(verifier, 'tap_iso_admin."check"'::text, 'stored schema-qualified') FROM kvg.knowledge WHERE id = :check_entry;
SET ROLE tap_iso_alice;
SELECT is(pg_temp.verdict('Who checks the tap check?'), true,
          'alice''s answer is verified by the superuser''s verifier, through mallory''s callee');
RESET ROLE;
SELECT pg_temp.committed(pg_temp.escalating('tap_iso_m.normalize(a text)', 'text', 'lower(btrim(a))')) \g /dev/null
SELECT isnt(kvg.function_pin('tap_iso_admin.check(text, text)'::regprocedure), :'check_pin',
            'the callee''s change changes the caller''s pin');
SET ROLE tap_iso_alice;
SET client_min_messages = error;
SELECT is(pg_temp.verdict('Who checks the tap check?'), false,
          'the changed callee fails closed: alice''s answer is not verified');
RESET client_min_messages;
RESET ROLE;
SELECT is((SELECT rolsuper FROM pg_roles WHERE rolname = 'tap_iso_mallory'), false, 'mallory is no superuser');
SELECT is(verified, false, 'the audit row records the unverified answer')
FROM kvg.audit WHERE operation = 'answer' ORDER BY seq DESC LIMIT 1;

-- Mallory's own verifier, rewritten after deposit (was 07_security.sql).
SET ROLE tap_iso_mallory;
SELECT kvg_learn('What did the tap dog do?', 'tap_iso_m.accept', 'The tap dog bit the girl.', 'bit') AS dog_entry \gset
SELECT isnt(verifier_pin, NULL, 'the verifier is pinned at deposit') FROM kvg.knowledge WHERE id = :dog_entry;
RESET ROLE;
SELECT pg_temp.committed(pg_temp.escalating('tap_iso_m.accept(q text, a text)', 'boolean', 'true')) \g /dev/null
SET client_min_messages = error;
SELECT is(pg_temp.verdict('What did the tap dog do?'), false,
          'a rewritten verifier fails closed, asked by a superuser');
RESET client_min_messages;
SELECT is((SELECT rolsuper FROM pg_roles WHERE rolname = 'tap_iso_mallory'), false,
          'and it did not run: its depositor did not become a superuser');

-- Who it runs as: kvg_verifier, whoever deposited and whoever asks.
SELECT kvg_learn('Who runs the tap verifier?', 'tap_iso_admin.whoami', 'The tap verifier runs.', 'runs') \g /dev/null
SET ROLE tap_iso_alice;
SELECT is(pg_temp.verdict('Who runs the tap verifier?'), true,
          'asked by alice, the superuser''s verifier runs as kvg_verifier');
RESET ROLE;
SELECT is(pg_temp.verdict('Who runs the tap verifier?'), true,
          'asked by a superuser, it runs as kvg_verifier too');

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
SELECT setval('tap_iso_admin.leak', 999) \g /dev/null
SET ROLE tap_iso_alice;
SET app.secret = 'hunter2';
PREPARE tap_iso_stmt AS SELECT 1;
DECLARE tap_iso_cur CURSOR FOR SELECT generate_series(1, 100) AS n;
SELECT pg_advisory_lock(7) \g /dev/null
SELECT is(pg_temp.verdict('What does the tap snoop see?'), true,
          'alice asks; the snooping verifier runs');
RESET ROLE;
SELECT is(last_value, 1::bigint,
          'what it passed out through setval is nothing of alice''s: no secret, no prepared statement, no cursor')
FROM tap_iso_admin.leak;
SET ROLE tap_iso_alice;
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
SELECT pg_temp.committed('UPDATE tap_iso_admin.nap SET seconds = 60') \g /dev/null
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

-- 5. Code that cannot be pinned is refused at deposit, by name ---------------------------
CREATE FUNCTION tap_iso_admin.dyn(q text, a text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  RETURN true;
END
$$;
SELECT throws_like($$SELECT kvg_learn('Is the tap dyn dynamic?', 'tap_iso_admin.dyn', 'It is.', 'is')$$,
                   '%reaches code%tap_iso_admin.dyn(text,text)%', 'a plpgsql verifier is refused by name');
SELECT throws_ok($$SELECT kvg_learn('Is the tap dyn dynamic?', 'tap_iso_admin.dyn', 'It is.', 'is')$$, '42P13', NULL,
                 'with SQLSTATE 42P13');
CREATE FUNCTION tap_iso_admin.old_style(q text, a text) RETURNS boolean LANGUAGE sql AS 'SELECT true';
SELECT throws_like($$SELECT kvg_learn('Is the tap body atomic?', 'tap_iso_admin.old_style', 'No.', 'no')$$,
                   '%reaches code%tap_iso_admin.old_style(text,text)%',
                   'so is an SQL function without a BEGIN ATOMIC or RETURN body');
CREATE FUNCTION tap_iso_admin.helper(a text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  RETURN a <> '';
END
$$;
CREATE FUNCTION tap_iso_admin.calls_helper(q text, a text) RETURNS boolean LANGUAGE sql
  RETURN tap_iso_admin.helper(a);
SELECT throws_like($$SELECT kvg_learn('Does the tap helper help?', 'tap_iso_admin.calls_helper', 'It helps.', 'helps')$$,
                   '%reaches code%tap_iso_admin.helper(text)%',
                   'an atomic verifier that calls a plpgsql function is refused, naming the callee');
CREATE FUNCTION tap_iso_admin.runs_text(q text, a text) RETURNS boolean LANGUAGE sql
  RETURN query_to_xml('SELECT ' || quote_literal(a), false, false, '') IS NOT NULL;
SELECT throws_like($$SELECT kvg_learn('Does the tap text run?', 'tap_iso_admin.runs_text', 'It runs.', 'runs')$$,
                   '%reaches code%tap_iso_admin.runs_text(text,text)%',
                   'dynamic SQL through a built-in (query_to_xml) is refused, naming the function that runs it');

CREATE FUNCTION tap_iso_admin.reads_any(q text, a text) RETURNS boolean LANGUAGE sql
  RETURN table_to_xml(a::regclass, false, false, '') IS NOT NULL;
SELECT throws_like($$SELECT kvg_learn('Does the tap table read?', 'tap_iso_admin.reads_any', 'It reads.', 'reads')$$,
                   '%reaches code%tap_iso_admin.reads_any(text,text)%',
                   'so is one that reads a relation chosen at run time (table_to_xml)');
CREATE FUNCTION tap_iso_admin.calls_c(q text, a text) RETURNS boolean LANGUAGE sql
  RETURN dblink_is_busy(a) = 0;
SELECT throws_like($$SELECT kvg_learn('Does the tap C call?', 'tap_iso_admin.calls_c', 'It calls.', 'calls')$$,
                   '%reaches code%dblink_is_busy(text)%',
                   'and one that calls an extension''s C function (dblink''s), naming it');

-- 1 (end). A dropped verifier fails closed.
SELECT pg_temp.committed('DROP FUNCTION tap_iso_m.accept(text, text)') \g /dev/null
SET client_min_messages = error;
SELECT is(pg_temp.verdict('What did the tap dog do?'), false, 'a dropped verifier fails closed');
RESET client_min_messages;

SELECT * FROM finish();
ROLLBACK;
DROP SCHEMA tap_iso_m, tap_iso_admin CASCADE;
DROP ROLE tap_iso_mallory;
