-- Transactions and concurrency, with real second sessions (dblink): a
-- rollback leaves the artifact the audit writer committed, unclaimed; two
-- sessions storing the same bytes at once keep one copy, without waiting.
-- The other sessions commit, so each test uses its own fixture.
BEGIN;
SELECT plan(13);
\ir fixtures.psql

\ir sessions.psql
CREATE FUNCTION pg_temp.import_sql(fixture text) RETURNS text LANGUAGE sql AS $$
  SELECT format('SELECT public.kvg_import(%L::bytea, verify => false)', pg_temp.fixture(fixture))
$$;
SELECT pg_temp.connect('a'), pg_temp.connect('b') \g /dev/null

-- Rollback in this session (a savepoint) and in another one (a whole
-- transaction): the audit writer committed the artifact, so it stays, but
-- unclaimed, for kvg_vacuum to collect (docs/audit-chain.md, "Artifacts").
-- (Earlier files may have stored and claimed these bytes: claims are counted.)
CREATE FUNCTION pg_temp.claims(artifact text) RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FROM kvg.artifact_claims c WHERE c.sha256 = artifact
$$;
SELECT pg_temp.claims(pg_temp.fixture_sha('root')) AS root_claims \gset
-- The large objects of an artifact's rows (earlier files may have stored it).
CREATE FUNCTION pg_temp.objects_of(artifact text) RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FROM kvg.artifacts a JOIN pg_largeobject_metadata m ON m.oid = a.loid WHERE a.sha256 = artifact
$$;
SAVEPOINT before_import;
SELECT public.kvg_import(pg_temp.fixture('root'), verify => false) \g /dev/null
ROLLBACK TO before_import;
SELECT is((SELECT count(*) FROM kvg.artifacts WHERE sha256 = pg_temp.fixture_sha('root')), 1::bigint,
          'rolled back to a savepoint: the writer''s row stays');
SELECT is(pg_temp.claims(pg_temp.fixture_sha('root')), :root_claims::bigint,
          'rolled back to a savepoint: its claim is gone with it');

SELECT dblink_exec('a', 'BEGIN') \g /dev/null
SELECT is((SELECT h FROM dblink('a', pg_temp.import_sql('root')) AS t(h text)), pg_temp.fixture_sha('root'),
          'another session imports inside a transaction');
SELECT dblink_exec('a', 'ROLLBACK') \g /dev/null
SELECT is(pg_temp.claims(pg_temp.fixture_sha('root')), :root_claims::bigint, 'rolled back transaction: no claim either');
SELECT is(pg_temp.objects_of(pg_temp.fixture_sha('root')), 1::bigint, 'rolled back transaction: one large object');

-- Two sessions store the same bytes at the same time: the second does not
-- wait on the first's open transaction, and no second copy is kept.
SELECT dblink_exec('a', 'BEGIN') \g /dev/null
SELECT is((SELECT h FROM dblink('a', pg_temp.import_sql('dedup')) AS t(h text)), pg_temp.fixture_sha('dedup'),
          'session a stores, uncommitted');
SELECT dblink_send_query('b', pg_temp.import_sql('dedup')) \g /dev/null
SELECT pg_sleep(0.3) \g /dev/null
SELECT is(dblink_is_busy('b'), 0, 'session b does not wait for session a');
SELECT dblink_exec('a', 'COMMIT') \g /dev/null
SELECT is((SELECT h FROM dblink_get_result('b') AS t(h text)), pg_temp.fixture_sha('dedup'),
          'session b gets the same identity');
SELECT * FROM dblink_get_result('b') AS t(h text) \g /dev/null
SELECT is((SELECT count(*) FROM kvg.artifacts WHERE sha256 = pg_temp.fixture_sha('dedup')), 1::bigint,
          'one catalog row');
SELECT is(pg_temp.objects_of(pg_temp.fixture_sha('dedup')), 1::bigint, 'one large object');
SELECT is(pg_temp.orphan_objects(), 0::bigint, 'no orphan large objects');
SELECT is((SELECT count(*) FROM kvg.audit WHERE artifact_sha256 = pg_temp.fixture_sha('dedup')), 2::bigint,
          'both imports are audited');
SELECT is((public.kvg_audit_verify()).ok, true, 'the chain verifies');

-- How audit rows are committed whatever the caller's transaction does:
-- 17_audit_writer.sql.

SELECT dblink_disconnect('a'), dblink_disconnect('b') \g /dev/null
SELECT * FROM finish();
ROLLBACK;
