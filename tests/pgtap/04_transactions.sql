-- Transactions and concurrency, with real second sessions (dblink): a
-- rollback leaves neither catalog row nor large object; two sessions storing
-- the same bytes at once keep one copy. The other sessions commit, so each
-- test uses its own fixture.
BEGIN;
SELECT plan(13);
\ir fixtures.psql

CREATE FUNCTION pg_temp.connect(name text) RETURNS text LANGUAGE sql AS $$
  SELECT dblink_connect(name, format('dbname=%s host=%s port=%s user=%s', current_database(),
                                     current_setting('unix_socket_directories'), current_setting('port'),
                                     current_user))
$$;
CREATE FUNCTION pg_temp.import_sql(fixture text) RETURNS text LANGUAGE sql AS $$
  SELECT format('SELECT public.kvg_import(%L::bytea, verify => false)', pg_temp.fixture(fixture))
$$;
SELECT pg_temp.connect('a'), pg_temp.connect('b') \g /dev/null

-- Rollback in this session (a savepoint) and in another one (a whole transaction).
SELECT count(*) AS objects_before FROM pg_largeobject_metadata \gset
SAVEPOINT before_import;
SELECT public.kvg_import(pg_temp.fixture('root'), verify => false) \g /dev/null
ROLLBACK TO before_import;
SELECT is((SELECT count(*) FROM kvg.artifacts WHERE sha256 = pg_temp.fixture_sha('root')), 0::bigint,
          'rolled back to a savepoint: no catalog row');
SELECT is((SELECT count(*) FROM pg_largeobject_metadata), :objects_before::bigint,
          'rolled back to a savepoint: no large object');

SELECT dblink_exec('a', 'BEGIN') \g /dev/null
SELECT is((SELECT h FROM dblink('a', pg_temp.import_sql('root')) AS t(h text)), pg_temp.fixture_sha('root'),
          'another session imports inside a transaction');
SELECT dblink_exec('a', 'ROLLBACK') \g /dev/null
SELECT is((SELECT count(*) FROM kvg.artifacts WHERE sha256 = pg_temp.fixture_sha('root')), 0::bigint,
          'rolled back transaction: no catalog row');
SELECT is((SELECT count(*) FROM pg_largeobject_metadata), :objects_before::bigint,
          'rolled back transaction: no large object');

-- Two sessions store the same bytes at the same time: the second waits on
-- the first's uncommitted row, then drops its own copy.
SELECT dblink_exec('a', 'BEGIN') \g /dev/null
SELECT is((SELECT h FROM dblink('a', pg_temp.import_sql('dedup')) AS t(h text)), pg_temp.fixture_sha('dedup'),
          'session a stores, uncommitted');
SELECT dblink_send_query('b', pg_temp.import_sql('dedup')) \g /dev/null
SELECT pg_sleep(0.3) \g /dev/null
SELECT is(dblink_is_busy('b'), 1, 'session b waits for session a');
SELECT dblink_exec('a', 'COMMIT') \g /dev/null
SELECT is((SELECT h FROM dblink_get_result('b') AS t(h text)), pg_temp.fixture_sha('dedup'),
          'session b gets the same identity');
SELECT * FROM dblink_get_result('b') AS t(h text) \g /dev/null
SELECT is((SELECT count(*) FROM kvg.artifacts WHERE sha256 = pg_temp.fixture_sha('dedup')), 1::bigint,
          'one catalog row');
SELECT is((SELECT count(*) FROM pg_largeobject_metadata), :objects_before::bigint + 1, 'one large object');
SELECT is(pg_temp.orphan_objects(), 0::bigint, 'no orphan large objects');
SELECT is((SELECT count(*) FROM kvg.audit WHERE artifact_sha256 = pg_temp.fixture_sha('dedup')), 2::bigint,
          'both imports are audited');
SELECT is((public.kvg_audit_verify()).ok, true, 'the chain verifies');

-- How audit rows are committed whatever the caller's transaction does:
-- 17_audit_writer.sql.

SELECT dblink_disconnect('a'), dblink_disconnect('b') \g /dev/null
SELECT * FROM finish();
ROLLBACK;
