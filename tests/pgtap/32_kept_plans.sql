-- kvg's own statements are planned once per process and the plans kept
-- (extension/src/spi/kept_plans.hpp, and the audit writer's statement in
-- writer_main.cpp): a call does not parse, analyse and plan them again. The
-- plan cache revalidates a kept plan when what it resolved changes, so a
-- kept plan resolves what a fresh one would: here, after the extension's
-- objects are dropped and made anew under a running writer, that writer's
-- next row goes into the new chain.
BEGIN;
SELECT plan(11);
\getenv data KVG_TEST_DATA
\set small :data '/models/stories260K.gguf'
SELECT set_config('kvg.model', :'small', true) \g /dev/null
SET LOCAL kvg.device = 'cpu';
SET LOCAL kvg.engine = backend;
SET LOCAL kvg.prefix_reuse = on;

-- The plans this backend keeps whose statement begins with `prefix` (the
-- plan cache names a plan's memory by its statement's text).
CREATE FUNCTION pg_temp.kept(prefix text) RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FROM pg_catalog.pg_backend_memory_contexts
  WHERE name = 'CachedPlanSource' AND starts_with(ident, prefix)
$$;
\set lookup 'SELECT sha256, n_tokens, tokens_sha256 FROM kvg.artifacts WHERE parent_sha256 IS NULL'

SELECT is(pg_temp.kept(:'lookup'), 0::bigint, 'before any call this backend keeps no plan of the prefix lookup');
SELECT kvg_generate('Once upon a time', 2) \g /dev/null
SELECT is(pg_temp.kept(:'lookup'), 1::bigint, 'a call keeps the plan of its statement (the prefix lookup)');
SELECT kvg_generate('Once upon a time, in a town', 2) \g /dev/null
SELECT kvg_generate('There was a cat', 2) \g /dev/null
SELECT is(pg_temp.kept(:'lookup'), 1::bigint, 'and the calls after it run that plan: none is made again');

-- A statement under the caller's own search_path (a function verifier's
-- name, resolved at deposit) is planned for its run only: kept, it would
-- not see a function made since ahead on the same path.
-- The verifier is committed (a verifier is frozen from another session),
-- and dropped after this file's ROLLBACK.
SELECT dblink_exec(format('dbname=%s host=%s port=%s user=%s', current_database(),
                          current_setting('unix_socket_directories'), current_setting('port'), current_user), $sql$
  DROP SCHEMA IF EXISTS tap_kept CASCADE;
  CREATE SCHEMA tap_kept;
  CREATE FUNCTION tap_kept.accept(q text, a text) RETURNS boolean LANGUAGE sql
  BEGIN ATOMIC
    SELECT a <> '';
  END;
$sql$) \g /dev/null
SELECT ok(kvg_learn('What does the kept cat do?', 'tap_kept.accept', 'The kept cat naps.', 'naps') IS NOT NULL,
          'an entry with a function verifier is deposited');
SELECT is(pg_temp.kept('SELECT format(''%I.%I'', n.nspname, p.proname)'), 0::bigint,
          'and the lookup of its verifier''s name, under the caller''s search_path, kept no plan');

-- The writer: a database of its own, whose extension is dropped and made
-- again between two audited calls while its writer runs.
SELECT dblink_exec(format('dbname=postgres host=%s port=%s user=%s', current_setting('unix_socket_directories'),
                          current_setting('port'), current_user),
                   'DROP DATABASE IF EXISTS kvg_tap_kept_plans WITH (FORCE)') \g /dev/null
SELECT dblink_exec(format('dbname=postgres host=%s port=%s user=%s', current_setting('unix_socket_directories'),
                          current_setting('port'), current_user),
                   'CREATE DATABASE kvg_tap_kept_plans') \g /dev/null
SELECT dblink_connect('kept', format('dbname=kvg_tap_kept_plans host=%s port=%s user=%s',
                                     current_setting('unix_socket_directories'), current_setting('port'),
                                     current_user)) \g /dev/null
SELECT dblink_exec('kept', 'CREATE EXTENSION kvg') \g /dev/null
SELECT dblink_exec('kept', format('SET kvg.model = %L', :'small')) \g /dev/null
SELECT dblink_exec('kept', 'SET kvg.device = cpu') \g /dev/null

CREATE FUNCTION pg_temp.remote_generate(prompt text) RETURNS text LANGUAGE sql AS $$
  SELECT t FROM dblink('kept', format('SELECT kvg_generate(%L, 2)', prompt)) AS r(t text)
$$;
CREATE FUNCTION pg_temp.remote_rows() RETURNS bigint LANGUAGE sql AS $$
  SELECT n FROM dblink('kept', 'SELECT count(*) FROM kvg.audit') AS r(n bigint)
$$;
CREATE FUNCTION pg_temp.remote_writer() RETURNS int LANGUAGE sql AS $$
  SELECT w.pid FROM kvg_audit_writers() w JOIN pg_catalog.pg_database d ON d.oid = w.database
  WHERE d.datname = 'kvg_tap_kept_plans' AND w.lane = 'rows'
$$;

SELECT pg_temp.remote_generate('Once upon a time') AS first_text \gset
SELECT is(pg_temp.remote_rows(), 1::bigint, 'the other database''s first call is audited by its writer');
SELECT pg_temp.remote_writer() AS writer \gset
SELECT dblink_exec('kept', 'DROP EXTENSION kvg CASCADE') \g /dev/null
SELECT dblink_exec('kept', 'CREATE EXTENSION kvg') \g /dev/null
SELECT is(pg_temp.remote_generate('Once upon a time'), :'first_text',
          'after DROP and CREATE EXTENSION the next call is answered');
SELECT is(pg_temp.remote_writer(), :writer, 'by the same writer, whose kept plan resolved the new objects');
SELECT is(pg_temp.remote_rows(), 1::bigint, 'its row is the new chain''s first');

-- DROP DATABASE waits until every process has absorbed its barrier. An idle
-- writer did not (its loop reached no CHECK_FOR_INTERRUPTS), so dropping any
-- database waited for the idle timeout of every writer alive (60 s). This
-- database's writer is alive and idle now (it wrote this file's calls).
SELECT ok(EXISTS (SELECT FROM kvg_audit_writers() w JOIN pg_catalog.pg_database d ON d.oid = w.database
                  WHERE d.datname = current_database() AND w.lane = 'rows' AND w.pid IS NOT NULL),
          'this database''s writer is alive');
SELECT dblink_disconnect('kept') \g /dev/null
SELECT clock_timestamp() AS drop_began \gset
SELECT dblink_exec(format('dbname=postgres host=%s port=%s user=%s', current_setting('unix_socket_directories'),
                          current_setting('port'), current_user),
                   'DROP DATABASE kvg_tap_kept_plans WITH (FORCE)') \g /dev/null
SELECT cmp_ok(clock_timestamp() - :'drop_began', '<', interval '10 s',
              'and dropping another database does not wait for it (a liveness bound, not a speed)');

SELECT * FROM finish();
ROLLBACK;
SET client_min_messages = warning;
DROP SCHEMA tap_kept CASCADE;
