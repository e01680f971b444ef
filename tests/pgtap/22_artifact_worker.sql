-- Artifacts are stored by the audit writer, in transactions of its own
-- (docs/audit-chain.md, "Artifacts"), with real second sessions (dblink,
-- which commit, so every prompt here is this file's own): an open
-- transaction that stored some bytes delays nobody storing the same bytes;
-- what a rolled-back call leaves is listed by kvg_orphans and collected by
-- kvg_vacuum, which never takes an artifact that a committed call claimed,
-- a library entry names, or an open transaction holds; REPEATABLE READ and
-- SERIALIZABLE callers use what they have just stored.
BEGIN;
SELECT plan(24);
\ir small_model.psql

\ir sessions.psql
-- One statement in session `conn`, given at most 3 s (then cancelled): its
-- one text value (NULL when it failed or was cancelled) and its seconds.
CREATE FUNCTION pg_temp.timed(conn text, query text, OUT result text, OUT seconds double precision)
LANGUAGE plpgsql AS $$
DECLARE
  began timestamptz := clock_timestamp();
BEGIN
  PERFORM dblink_send_query(conn, query);
  WHILE dblink_is_busy(conn) = 1 AND clock_timestamp() - began < interval '3 s' LOOP
    PERFORM pg_sleep(0.005);
  END LOOP;
  seconds := extract(epoch FROM clock_timestamp() - began);
  IF dblink_is_busy(conn) = 1 THEN
    PERFORM dblink_cancel_query(conn);
  END IF;
  SELECT r INTO result FROM dblink_get_result(conn, false) AS t(r text);
  PERFORM FROM dblink_get_result(conn, false) AS t(r text);
END $$;
CREATE FUNCTION pg_temp.capture_sql(prompt text) RETURNS text LANGUAGE sql AS $$
  SELECT format('SELECT public.kvg_capture(%L)', prompt)
$$;
CREATE FUNCTION pg_temp.stored(artifact text) RETURNS boolean LANGUAGE sql AS $$
  SELECT EXISTS (SELECT FROM kvg.artifacts a WHERE a.sha256 = artifact
                 AND EXISTS (SELECT FROM pg_largeobject_metadata m WHERE m.oid = a.loid))
$$;
CREATE FUNCTION pg_temp.unreferenced(artifact text) RETURNS boolean LANGUAGE sql AS $$
  SELECT EXISTS (SELECT FROM public.kvg_orphans() o WHERE o.kind = 'unreferenced_artifact' AND o.artifact = $1)
$$;
SELECT pg_temp.connect(c), dblink_exec(c, format('SET kvg.model = %L', current_setting('kvg.model'))),
       dblink_exec(c, 'SET kvg.device = cpu')
FROM unnest(ARRAY['mallory', 'alice', 'b', 'c']) c \g /dev/null
\set x 'Mallory predicted this prompt: Lily found a shiny red ball in the park.'

-- Mallory stores X and keeps her transaction open; Alice stores X too.
SELECT dblink_exec('mallory', 'BEGIN') \g /dev/null
SELECT r AS mallory_x FROM dblink('mallory', pg_temp.capture_sql(:'x')) AS t(r text) \gset
SELECT result AS alice_x, seconds AS alice_seconds FROM pg_temp.timed('alice', pg_temp.capture_sql(:'x')) \gset
SELECT is(:'alice_x'::text, :'mallory_x'::text, 'Alice stores the bytes Mallory stored, uncommitted: the same identity');
SELECT cmp_ok(:'alice_seconds'::float8, '<', 0.5::float8,
              'Alice does not wait for Mallory''s open transaction (' || :'alice_seconds' || ' s)');
SELECT isnt((SELECT result FROM pg_temp.timed('alice', format('SELECT public.kvg_generate(%L, 2, artifact => %L)',
                                                              :'x' || ' She', :'alice_x'))),
            NULL, 'Alice generates from it at once');
SELECT dblink_exec('mallory', 'ROLLBACK') \g /dev/null
SELECT is((public.kvg_artifact_verify(:'alice_x')).ok, true, 'after Mallory rolls back, Alice''s artifact is intact');
SELECT is(pg_temp.unreferenced(:'alice_x'), false, 'Alice''s committed claim keeps it referenced');
SELECT * FROM dblink('alice', pg_temp.capture_sql(:'x')) AS t(r text) \g /dev/null

-- A capture rolled back that nothing references: listed, then collected.
\set y 'Nobody keeps this prompt: Tom dropped his blue kite in the river.'
SELECT dblink_exec('b', 'BEGIN') \g /dev/null
SELECT r AS rolled_back FROM dblink('b', pg_temp.capture_sql(:'y')) AS t(r text) \gset
SELECT dblink_exec('b', 'ROLLBACK') \g /dev/null
SELECT is(pg_temp.stored(:'rolled_back'), true, 'a rolled-back capture leaves its artifact, committed by the writer');
SELECT is(pg_temp.unreferenced(:'rolled_back'), true, 'kvg_orphans lists it as an unreferenced artifact');

-- An open transaction that stored an artifact keeps it through kvg_vacuum.
\set w 'Held open: Ben counted seven yellow ducks by the pond.'
SELECT dblink_exec('c', 'BEGIN') \g /dev/null
SELECT r AS held FROM dblink('c', pg_temp.capture_sql(:'w')) AS t(r text) \gset
SELECT cmp_ok(public.kvg_vacuum(), '>=', 1::bigint, 'kvg_vacuum collects something');
SELECT is(pg_temp.stored(:'rolled_back'), false, 'the rolled-back capture''s artifact and object are gone');
SELECT is(pg_temp.stored(:'held'), true, 'an artifact that an open transaction stored is kept');
SELECT is(pg_temp.stored(:'alice_x'), true, 'an artifact that a committed call claimed is kept');
SELECT is(s.orphan_count, 0::bigint, 'kvg_vacuum leaves no unreferenced artifact it could take')
FROM (SELECT count(*) AS orphan_count FROM public.kvg_orphans() o
      WHERE o.kind = 'unreferenced_artifact' AND o.artifact <> :'held') s;
SELECT dblink_exec('c', 'COMMIT') \g /dev/null
SELECT is(pg_temp.unreferenced(:'held'), false, 'once that transaction commits, its claim references it');
SELECT public.kvg_vacuum() \g /dev/null
SELECT is(pg_temp.stored(:'held'), true, 'and kvg_vacuum keeps it');
SELECT is((SELECT count(*) FROM kvg.artifact_claims WHERE sha256 = :'alice_x'), 1::bigint,
          'kvg_vacuum keeps one claim per artifact');

-- REPEATABLE READ: the snapshot predates the capture, whose row the writer
-- committed; the same transaction grafts it.
\set v 'Repeatable read: Ann baked a round apple pie for her grandmother.'
SELECT dblink_exec('b', 'BEGIN ISOLATION LEVEL REPEATABLE READ') \g /dev/null
SELECT * FROM dblink('b', 'SELECT count(*)::text FROM kvg.artifacts') AS t(n text) \g /dev/null
SELECT r AS rr FROM dblink('b', pg_temp.capture_sql(:'v')) AS t(r text) \gset
SELECT isnt((SELECT result FROM pg_temp.timed('b', format('SELECT public.kvg_generate(%L, 2, artifact => %L)',
                                                          :'v' || ' It', :'rr'))),
            NULL, 'REPEATABLE READ: capture, then generate from it in the same transaction');
SELECT is(dblink_exec('b', 'COMMIT'), 'COMMIT', 'and it commits');

-- SERIALIZABLE: learn (artifact and library entry) commits.
\set q 'What did Ann bake for her grandmother?'
SELECT dblink_exec('b', 'BEGIN ISOLATION LEVEL SERIALIZABLE') \g /dev/null
SELECT * FROM dblink('b', 'SELECT count(*)::text FROM kvg.knowledge') AS t(n text) \g /dev/null
SELECT isnt((SELECT result FROM pg_temp.timed('b', format('SELECT public.kvg_learn(%L, ''contains'', %L, %L)::text',
                                                          :'q', :'v', 'pie'))),
            NULL, 'SERIALIZABLE: kvg_learn');
SELECT is(dblink_exec('b', 'COMMIT'), 'COMMIT', 'and it commits, its entry checked against the writer''s row');
SELECT artifact_sha256 AS learned FROM kvg.knowledge WHERE question = :'q' \gset
SELECT is(pg_temp.unreferenced(:'learned'), false, 'a library entry''s artifact is referenced');

-- The library entry's artifact reference is checked as a foreign key would be.
SET CONSTRAINTS ALL IMMEDIATE;
SELECT throws_ok(format($$INSERT INTO kvg.knowledge (question, question_key, solution, answer, verifier, evidence,
                                                     verified_by, artifact_sha256)
                          VALUES ('q', repeat('1', 64), 's', 'a', 'kvg.verify', 'e', current_user, %L)$$,
                        repeat('0', 64)),
                 '23503', NULL, 'a library entry naming no stored artifact is refused');
SELECT throws_ok(format('DELETE FROM kvg.artifacts WHERE sha256 = %L', :'learned'), '23503', NULL,
                 'deleting a library entry''s artifact is refused');
SET CONSTRAINTS ALL DEFERRED;

-- The worker stores what the caller's backend built: nobody else may call it.
SET LOCAL ROLE kvg_user;
SELECT throws_ok($$SELECT kvg.artifact_store(repeat('0', 64), '\x00', NULL, NULL, NULL, NULL, NULL, 'x', 'computed',
                                             'x', 0, true)$$,
                 '42501', NULL, 'kvg_user cannot call kvg.artifact_store');
RESET ROLE;
SELECT is((public.kvg_audit_verify()).ok, true, 'the chain verifies');

SELECT dblink_disconnect(c) FROM unnest(ARRAY['mallory', 'alice', 'b', 'c']) c \g /dev/null
SELECT * FROM finish();
ROLLBACK;
