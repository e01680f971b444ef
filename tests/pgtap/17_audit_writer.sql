-- The audit writer (docs/audit-chain.md), with real second sessions
-- (dblink, which commit): kvg is preloaded, so its settings are checked at
-- SET; an audited call's row is committed by the writer before the call
-- returns, whatever the caller's transaction does afterwards; no open
-- transaction makes another session's call wait; overlapping SERIALIZABLE
-- transactions with audited calls all commit; a writer stopped in the
-- middle of an append refuses the call and leaves nothing half-written; an
-- artifact's store that waits holds no audited call (a lane of its own).
BEGIN;
SELECT plan(26);
\getenv data KVG_TEST_DATA
\set small :data '/models/stories260K.gguf'
SELECT set_config('kvg.model', :'small', true) \g /dev/null

CREATE FUNCTION pg_temp.connect(name text) RETURNS text LANGUAGE sql AS $$
  SELECT dblink_connect(name, format('dbname=%s host=%s port=%s user=%s', current_database(),
                                     current_setting('unix_socket_directories'), current_setting('port'),
                                     current_user))
    || dblink_exec(name, format('SET kvg.model = %L', current_setting('kvg.model')))
$$;
CREATE FUNCTION pg_temp.generate_sql(prompt text) RETURNS text LANGUAGE sql AS $$
  SELECT format('SELECT public.kvg_generate(%L, 4)', prompt)
$$;
-- Seconds until this database's writer of `lane` waits for a lock (or 5 s).
CREATE FUNCTION pg_temp.writer_waits(lane text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. 100 LOOP
    IF EXISTS (SELECT FROM pg_locks l JOIN kvg_audit_writers() w ON w.pid = l.pid
               WHERE w.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                 AND w.lane = writer_waits.lane AND NOT l.granted) THEN
      RETURN true;
    END IF;
    PERFORM pg_sleep(0.05);
  END LOOP;
  RETURN false;
END $$;
SELECT pg_temp.connect('a'), pg_temp.connect('b') \g /dev/null

-- Settings exist from the first statement: a misspelled or unknown value
-- is refused at SET, not accepted as a placeholder.
SELECT throws_ok($$SET kvg.recipie = 'f32-portable-v1'$$, '42602', NULL, 'a misspelled kvg setting is refused at SET');
SELECT throws_ok($$SET kvg.recipe = 'no-such-recipe'$$, '22023', NULL, 'an unknown recipe is refused at SET');

-- BEGIN; kvg_generate; ROLLBACK: the answer was delivered, so its row stays.
SELECT dblink_exec('a', 'BEGIN') \g /dev/null
SELECT length(g) > 0 AS delivered FROM dblink('a', pg_temp.generate_sql('Once upon a time')) AS t(g text) \g /dev/null
SELECT x AS a_xid FROM dblink('a', 'SELECT pg_current_xact_id()::text') AS t(x text) \gset
SELECT dblink_exec('a', 'ROLLBACK') \g /dev/null
SELECT is(count(*), 1::bigint, 'BEGIN; kvg_generate; ROLLBACK leaves the call''s row, committed')
FROM kvg.audit WHERE caller_xid = :'a_xid'::xid8 AND operation = 'generate';
SELECT is(pg_xact_status(:'a_xid'::xid8), 'aborted', 'its caller_xid tells that the caller rolled back');
SELECT is(session_role::text || ' ' || role::text, 'postgres postgres', 'it names the session user and current user')
FROM kvg.audit WHERE caller_xid = :'a_xid'::xid8;
SELECT ok(seq IS NOT NULL AND prev_hash ~ '^[0-9a-f]{64}$', 'it is linked into the chain')
FROM kvg.audit WHERE caller_xid = :'a_xid'::xid8;
SELECT is((public.kvg_audit_verify()).ok, true, 'the chain verifies');
SELECT is(state, 'running', 'this database''s audit writer runs') FROM kvg_audit_writers()
WHERE database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND lane = 'rows';

-- A long transaction holding an audited call, busy (so no idle timeout
-- applies), delays nobody: another session's call completes at once.
SELECT dblink_exec('a', 'BEGIN') \g /dev/null
SELECT length(g) > 0 FROM dblink('a', pg_temp.generate_sql('Once upon a time')) AS t(g text) \g /dev/null
SELECT dblink_send_query('a', 'SELECT pg_sleep(3)') \g /dev/null
SELECT clock_timestamp() AS t0 \gset
SELECT length(g) > 0 FROM dblink('b', pg_temp.generate_sql('There was a dog')) AS t(g text) \g /dev/null
SELECT ok(clock_timestamp() - :'t0'::timestamptz < interval '0.5 s',
          'an open, busy transaction with an audited call delays another session''s call by < 0.5 s');
SELECT * FROM dblink_get_result('a') AS t(x text) \g /dev/null
SELECT * FROM dblink_get_result('a') AS t(x text) \g /dev/null
SELECT dblink_exec('a', 'ROLLBACK') \g /dev/null

-- Artifacts have a writer of their own (a lane): a store that waits, here on
-- a lock a superuser holds (as a 150 MB import's bytes take seconds to
-- write), delays no audited call.
SELECT dblink_exec('a', 'BEGIN') \g /dev/null
SELECT dblink_exec('a', 'LOCK TABLE kvg.storage_accounts IN EXCLUSIVE MODE') \g /dev/null
SELECT dblink_send_query('b', format('SELECT public.kvg_capture(%L)', 'The lanes of run ' || clock_timestamp()))
\g /dev/null
SELECT ok(pg_temp.writer_waits('artifacts'), 'the artifacts writer waits for the lock, storing b''s capture');
SELECT ok(length(public.kvg_generate('There was a cat', 4)) > 0 AND dblink_is_busy('b') = 1,
          'meanwhile an audited call''s row commits: the store holds no audited call');
SELECT dblink_exec('a', 'ROLLBACK') \g /dev/null
SELECT ok(x ~ '^[0-9a-f]{64}$', 'and the capture is stored once the lock is gone') FROM dblink_get_result('b') AS t(x text);
SELECT * FROM dblink_get_result('b') AS t(x text) \g /dev/null
-- No kvg_user can hold the chain's head.
CREATE ROLE tap_holder IN ROLE kvg_user;
SET LOCAL ROLE tap_holder;
SELECT throws_ok($$LOCK TABLE kvg.audit_head IN EXCLUSIVE MODE$$, '42501', NULL, 'a kvg_user cannot lock the chain''s head');
RESET ROLE;

-- A writer stopped in the middle of an append (here: while it waits for the
-- head, which a superuser holds) refuses the call; nothing is half-written.
SELECT count(*) AS rows_before FROM kvg.audit \gset
SELECT dblink_exec('a', 'BEGIN') \g /dev/null
SELECT dblink_exec('a', 'LOCK TABLE kvg.audit_head IN EXCLUSIVE MODE') \g /dev/null
SELECT dblink_send_query('b', pg_temp.generate_sql('Once upon a time')) \g /dev/null
SELECT ok(pg_temp.writer_waits('rows'), 'the writer waits for the head');
SELECT pid AS writer_pid FROM kvg_audit_writers()
WHERE database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND lane = 'rows' \gset
SELECT ok(pg_terminate_backend(:writer_pid), 'the writer is stopped in the middle of its append');
SET LOCAL client_min_messages = warning;
SELECT * FROM dblink_get_result('b', false) AS t(g text) \g /dev/null
RESET client_min_messages;
SELECT matches(dblink_error_message('b'), 'audit row cannot be recorded.*refused',
               'the call waiting for it is refused, not answered');
SELECT * FROM dblink_get_result('b', false) AS t(g text) \g /dev/null
SELECT dblink_exec('a', 'ROLLBACK') \g /dev/null
SELECT is((SELECT count(*) FROM kvg.audit), :rows_before::bigint, 'no row of the refused call was written');
SELECT ok((SELECT length(g) > 0 FROM dblink('b', pg_temp.generate_sql('Once upon a time')) AS t(g text)),
          'the next call is answered (a writer runs again)');
SELECT is((public.kvg_audit_verify()).ok, true, 'the chain verifies');
SELECT dblink_disconnect('a'), dblink_disconnect('b') \g /dev/null

-- 16 overlapping SERIALIZABLE transactions, each with an audited call after
-- the others have taken their snapshots: none fails to serialize because
-- of the audit (the caller's transaction never touches the chain).
SELECT pg_temp.connect('s' || i) FROM generate_series(1, 16) i \g /dev/null
SELECT dblink_exec('s' || i, 'BEGIN ISOLATION LEVEL SERIALIZABLE') FROM generate_series(1, 16) i \g /dev/null
SELECT n FROM generate_series(1, 16) i, dblink('s' || i, 'SELECT count(*) FROM kvg.audit') AS t(n bigint) \g /dev/null
SELECT is(count(*), 16::bigint, 'each of 16 SERIALIZABLE transactions makes an audited call')
FROM generate_series(1, 16) i, dblink('s' || i, pg_temp.generate_sql('Once upon a time ' || i)) AS t(g text);
SELECT is(array_agg(r ORDER BY i), array_fill('COMMIT'::text, ARRAY[16]), 'all 16 commit')
FROM (SELECT i, dblink_exec('s' || i, 'COMMIT', false) AS r FROM generate_series(1, 16) i) c;
SELECT is(count(*), 16::bigint, 'their 16 rows name committed callers')
FROM kvg.audit WHERE operation = 'generate' AND input_sha256 IN
  (SELECT encode(sha256(convert_to('Once upon a time ' || i, 'UTF8')), 'hex') FROM generate_series(1, 16) i)
  AND pg_xact_status(caller_xid) = 'committed';
SELECT dblink_disconnect('s' || i) FROM generate_series(1, 16) i \g /dev/null

-- An auditor exports the artifact a row names, as stored.
SELECT public.kvg_capture('Once upon a time there was a cat') AS captured \gset
CREATE ROLE tap_auditor IN ROLE kvg_auditor;
SET LOCAL ROLE tap_auditor;
SELECT is(encode(sha256(public.kvg_export(a.artifact_sha256)), 'hex'), :'captured',
          'a kvg_auditor exports the artifact a capture row names')
FROM kvg.audit a WHERE a.operation = 'capture' AND a.artifact_sha256 = :'captured' LIMIT 1;
RESET ROLE;

-- The writer reports its tables' changes (a background worker must), so
-- autovacuum learns of the head's dead versions, one per audit row: the
-- head's updates show in pg_stat_user_tables soon after a call.
CREATE FUNCTION pg_temp.head_updates() RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_stat_clear_snapshot();
  RETURN (SELECT n_tup_upd FROM pg_stat_user_tables WHERE relid = 'kvg.audit_head'::regclass);
END $$;
SELECT pg_temp.head_updates() AS head_updates_before \gset
SELECT public.kvg_generate('A statistic is', 2) \g /dev/null
CREATE FUNCTION pg_temp.head_updates_after(before bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. 100 LOOP
    EXIT WHEN pg_temp.head_updates() > before;
    PERFORM pg_sleep(0.05);
  END LOOP;
  RETURN pg_temp.head_updates();
END $$;
SELECT cmp_ok(pg_temp.head_updates_after(:head_updates_before), '>', :head_updates_before::bigint,
              'the writer reports its updates of the chain''s head to the statistics autovacuum reads');

-- The writer finds the head's row at the version it wrote last (a TID
-- scan) and updates it by that ctid: neither statement scans
-- kvg.audit_head, whose dead versions (one per row) a long snapshot keeps,
-- and each of which a scan visits. Only a writer's first row (or one after
-- another session appended) looks the head up by its key, so four rows make
-- at most one scan (sequential or of the index), not four (with the key) or
-- eight (with two sequential scans a row, before).
CREATE FUNCTION pg_temp.head_scans() RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_stat_clear_snapshot();
  RETURN (SELECT seq_scan + coalesce(idx_scan, 0) FROM pg_stat_user_tables WHERE relid = 'kvg.audit_head'::regclass);
END $$;
SELECT pg_temp.head_updates_after(-1) AS updates_before, pg_temp.head_scans() AS scans_before \gset
SELECT public.kvg_generate('A scan of ' || n, 2) FROM generate_series(1, 4) n \g /dev/null
CREATE FUNCTION pg_temp.head_updates_reach(target bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. 100 LOOP
    EXIT WHEN pg_temp.head_updates() >= target;
    PERFORM pg_sleep(0.05);
  END LOOP;
  RETURN pg_temp.head_updates();
END $$;
SELECT cmp_ok(pg_temp.head_updates_reach(:updates_before + 4), '>=', :updates_before + 4::bigint,
              'four calls'' head updates are reported');
SELECT cmp_ok(pg_temp.head_scans() - :scans_before, '<=', 1::bigint,
              'and they scanned kvg.audit_head at most once: the writer goes to the version it wrote last');

SELECT * FROM finish();
ROLLBACK;
