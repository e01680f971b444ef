-- Artifacts are private to who caused them, except published ones
-- (docs/security.md, section 9). The attack: mallory, a plain kvg_user,
-- exported alice's capture and decoded her prompt with the public
-- vocabulary; a transfer answer stored the asker's question as a chain link
-- that anyone could export the same way; and prefix reuse grafted other
-- users' stored prompts, which a call's speed gives away.
-- Owners are session users, so each user here is a SET SESSION
-- AUTHORIZATION (SET ROLE keeps the superuser as the session user).
BEGIN;
SELECT plan(60);
\ir small_model.psql
SET LOCAL kvg.prefix_reuse = on;

CREATE ROLE tap_alice IN ROLE kvg_user;
CREATE ROLE tap_mallory IN ROLE kvg_user;
CREATE ROLE tap_writer IN ROLE kvg_author;
CREATE ROLE tap_audit IN ROLE kvg_auditor;
\set secret 'Alice wrote her secret: the red box is under the old tree by the pond.'
\set refused 'is not stored, or is not yours to read'

-- Alice's captures: her secret, twice (two claims), and a continuation of it.
SET SESSION AUTHORIZATION tap_alice;
SELECT kvg_capture(:'secret') AS alice_art \gset
SELECT kvg_capture(:'secret') \g /dev/null
SELECT kvg_capture(' She told nobody.', :'alice_art') AS alice_child \gset
SELECT kvg_export(:'alice_art') AS alice_bytes, kvg_export(:'alice_child') AS child_bytes \gset
SELECT is(length(kvg_export(:'alice_art')) > 0, true, 'alice exports her own capture');
SELECT is((SELECT (role, session_role, artifact_sha256, output_sha256)::text FROM kvg.readable_audit
           WHERE operation = 'export' ORDER BY seq DESC LIMIT 1),
          format('(tap_alice,tap_alice,%s,%s)', :'alice_art', :'alice_art'),
          'an export is audited: a row names the reader and the artifact');
SELECT is((SELECT count(*) FROM kvg.readable_artifacts WHERE sha256 IN (:'alice_art', :'alice_child')), 2::bigint,
          'alice sees her artifacts in kvg.readable_artifacts');
-- A call that rolls back leaves no claim: its caller is not the owner.
SAVEPOINT draft;
SELECT kvg_capture('Alice deleted this draft about the blue kite.') AS draft \gset
ROLLBACK TO draft;
SET SESSION AUTHORIZATION tap_alice;
SELECT throws_ok(format('SELECT kvg_export(%L)', :'draft'), '42501', format('artifact %s %s', :'draft', :'refused'),
                 'a capture whose call rolled back is not its caller''s');
RESET SESSION AUTHORIZATION;
SELECT is((SELECT count(*) FROM kvg.artifacts WHERE sha256 = :'draft'), 1::bigint,
          '(though the audit writer stored its bytes, until kvg_vacuum)');

-- Mallory may name none of them, and learns nothing from the refusal.
SET SESSION AUTHORIZATION tap_mallory;
SELECT throws_ok(format('SELECT kvg_export(%L)', :'alice_art'), '42501',
                 format('artifact %s %s', :'alice_art', :'refused'),
                 'mallory''s kvg_export of alice''s capture is refused');
SELECT throws_ok(format('SELECT kvg_export(%L)', repeat('ab', 32)), '42501',
                 format('artifact %s %s', repeat('ab', 32), :'refused'),
                 'an artifact that is not stored gets the same error');
SELECT throws_ok(format('SELECT kvg_generate(%L, 4, %L)', ' She', :'alice_art'), '42501', NULL,
                 'kvg_generate after alice''s artifact is refused');
SELECT throws_ok(format('SELECT kvg_generate_bytes(%L, 4, %L)', ' She', :'alice_art'), '42501', NULL,
                 'so is kvg_generate_bytes');
SELECT throws_ok(format('SELECT kvg_capture(%L, %L)', ' She', :'alice_art'), '42501', NULL,
                 'kvg_capture continuing it is refused');
SELECT throws_ok(format('SELECT * FROM kvg_graft_check(%L, %L)', :'alice_art', ' She'), '42501', NULL,
                 'kvg_graft_check of it is refused');
SELECT throws_ok(format('SELECT * FROM kvg_artifact_verify(%L)', :'alice_art'), '42501', NULL,
                 'kvg_artifact_verify of it is refused');
SELECT throws_ok(format('SELECT kvg_tokenize(%L, %L)', ' She', :'alice_art'), '42501', NULL,
                 'kvg_tokenize after it is refused');
SELECT throws_ok(format('SELECT * FROM kvg_generate_positional(ARRAY[%L], %L, 4)', :'alice_art', ' She'), '42501',
                 NULL, 'kvg_generate_positional with it is refused');
SELECT throws_ok(format('SELECT kvg_export(%L)', :'alice_child'), '42501', NULL,
                 'alice''s continuation is hers too');
SELECT throws_ok(format('SELECT kvg_import(%L::bytea, verify => false)', :'child_bytes'), '42501',
                 format('artifact %s %s', :'alice_art', :'refused'),
                 'importing an artifact that continues alice''s is refused: its parent would be grafted');
SELECT is((SELECT count(*) FROM kvg.readable_artifacts WHERE sha256 IN (:'alice_art', :'alice_child', :'draft')),
          0::bigint, 'mallory''s kvg.readable_artifacts shows none of alice''s rows');
SELECT throws_ok('SELECT count(*) FROM kvg.artifacts', '42501', NULL,
                 'a kvg_user does not read kvg.artifacts itself (a plan would count other users'' rows)');
SELECT throws_ok('SELECT count(*) FROM kvg.artifact_claims', '42501', NULL, 'nor anyone''s claims');

-- Prefix reuse grafts alice's stored prefix into her own call, not into
-- mallory's (the grafted token count would time it).
SET SESSION AUTHORIZATION tap_alice;
SELECT kvg_generate(:'secret' || ' Then', 2) \g /dev/null
RESET SESSION AUTHORIZATION;
SELECT is((artifact_sha256, tokens_grafted > 0)::text, format('(%s,t)', :'alice_art'),
          'alice''s generate grafts her stored prefix')
FROM kvg.audit WHERE operation = 'generate' AND session_role = 'tap_alice' ORDER BY seq DESC LIMIT 1;
SET SESSION AUTHORIZATION tap_mallory;
SELECT kvg_generate(:'secret' || ' Then', 2) \g /dev/null
RESET SESSION AUTHORIZATION;
SELECT is((artifact_sha256, tokens_grafted)::text, '(,0)',
          'mallory''s generate of the same prompt grafts nothing of alice''s')
FROM kvg.audit WHERE operation = 'generate' AND session_role = 'tap_mallory' ORDER BY seq DESC LIMIT 1;

-- The same content captured by two users is stored once and belongs to both.
SET SESSION AUTHORIZATION tap_mallory;
SELECT is(kvg_capture(:'secret'), :'alice_art', 'mallory''s capture of the same text is the same artifact');
SELECT is(kvg_export(:'alice_art'), :'alice_bytes'::bytea, 'and now mallory exports it');
SELECT lives_ok(format('SELECT kvg_generate(%L, 2, %L)', ' Then', :'alice_art'), 'and generates after it');
SELECT throws_ok(format('SELECT kvg_export(%L)', :'alice_child'), '42501', NULL,
                 'alice''s continuation of it is still alice''s alone');
SET SESSION AUTHORIZATION tap_alice;
SELECT is(length(kvg_export(:'alice_art')) > 0, true, 'alice still exports it');
RESET SESSION AUTHORIZATION;
SELECT is((SELECT count(*) FROM kvg.artifacts WHERE sha256 = :'alice_art'), 1::bigint, 'stored once');
SELECT public.kvg_vacuum() \g /dev/null
SELECT is((SELECT string_agg(claimed_by, ',' ORDER BY claimed_by) FROM kvg.artifact_claims
           WHERE sha256 = :'alice_art'), 'tap_alice,tap_mallory',
          'kvg_vacuum keeps one claim per owner');

-- Published: a library entry's artifact and its chain's ancestors, for everyone.
SET SESSION AUTHORIZATION tap_writer;
SELECT kvg_learn('What colour was Zed''s kite?', 'contains',
                 'Zed had a red kite. Zed flew his red kite at the beach every day.', 'red') AS entry \gset
RESET SESSION AUTHORIZATION;
SELECT artifact_sha256 AS published FROM kvg.knowledge WHERE id = :entry \gset
CREATE TEMP TABLE chain ON COMMIT DROP AS
  WITH RECURSIVE c AS (SELECT sha256, parent_sha256 FROM kvg.artifacts WHERE sha256 = :'published'
                       UNION SELECT a.sha256, a.parent_sha256 FROM kvg.artifacts a JOIN c ON a.sha256 = c.parent_sha256)
  SELECT sha256 FROM c;
GRANT SELECT ON chain TO PUBLIC;
SELECT cmp_ok((SELECT count(*) FROM chain), '>', 1::bigint, 'the entry''s artifact continues a chain');
SET SESSION AUTHORIZATION tap_mallory;
SELECT is((SELECT count(*) FROM kvg.readable_artifacts WHERE sha256 IN (SELECT sha256 FROM chain)),
          (SELECT count(*) FROM chain), 'mallory sees the entry''s artifact and every ancestor of it');
SELECT is(length(kvg_export(:'published')) > 0, true, 'and exports the entry''s artifact');
SELECT lives_ok(format('SELECT kvg_generate(%L, 2, %L)', ' The', :'published'), 'and generates after it');
SELECT throws_ok(format('SELECT kvg_export(%L)', :'alice_child'), '42501', NULL,
                 'an entry publishes its own chain, nothing else');

-- A transfer answer's link holds alice's question: it is hers, not published.
SET SESSION AUTHORIZATION tap_alice;
SELECT is(mode, 'transfer', 'alice''s related question is a transfer answer')
FROM kvg_answer_detail('Zed flew his red kite at the', 4);
RESET SESSION AUTHORIZATION;
SELECT sha256 AS alice_link FROM kvg.artifact_claims WHERE claimed_by = 'tap_alice' ORDER BY id DESC LIMIT 1 \gset
SELECT is((SELECT parent_sha256 FROM kvg.artifacts WHERE sha256 = :'alice_link') IN (SELECT sha256 FROM chain), true,
          'it continues the library''s chain');
SET SESSION AUTHORIZATION tap_mallory;
SELECT throws_ok(format('SELECT kvg_export(%L)', :'alice_link'), '42501', NULL,
                 'mallory''s kvg_export of alice''s transfer link is refused');
SET SESSION AUTHORIZATION tap_alice;
SELECT is(length(kvg_export(:'alice_link')) > 0, true, 'alice exports it');

-- Auditors read all.
SET SESSION AUTHORIZATION tap_audit;
SELECT is((SELECT count(*) FROM kvg.artifacts WHERE sha256 IN (:'alice_art', :'alice_child', :'alice_link')),
          3::bigint, 'an auditor sees every user''s artifacts');
SELECT is((SELECT count(*) FROM kvg.readable_artifacts WHERE sha256 IN (:'alice_art', :'alice_child', :'alice_link')),
          3::bigint, 'in kvg.readable_artifacts too');
SELECT is(length(kvg_export(:'alice_child')) > 0, true, 'and exports them');
RESET SESSION AUTHORIZATION;
SELECT is((SELECT count(*) FROM kvg.artifacts WHERE sha256 IN (:'alice_art', :'alice_child', :'alice_link')),
          3::bigint, 'so does a superuser');
SELECT throws_ok(format('SELECT kvg_export(%L)', repeat('ab', 32)), '42704', NULL,
                 'who reads every artifact is told plainly that one is not stored');

-- No plan counts other users' rows (the third review's EXPLAIN attack: with
-- a policy on kvg.artifacts, "Rows Removed by Filter: 1" showed exactly when
-- another user had stored a guessed prompt, and a range of hashes, a
-- leakproof index condition, listed every stored SHA-256). A kvg_user reads
-- kvg.readable_artifacts and kvg.storage_usage, whose rows come out of a
-- function: its plan is the same whatever other users stored. The hashes a
-- query names are blanked, so that the plans compare as wholes.
SET SESSION AUTHORIZATION tap_alice;
SELECT kvg_capture('Alice keeps a private note about the green door.') AS alice_note \gset
RESET SESSION AUTHORIZATION;
SELECT tokens_sha256 AS alice_tokens FROM kvg.artifacts WHERE sha256 = :'alice_note' \gset
CREATE FUNCTION pg_temp.plan_of(query text, hidden text DEFAULT NULL) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  line text;
  plan text := '';
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || query LOOP
    plan := plan || coalesce(replace(line, hidden, '<hash>'), line) || E'\n';
  END LOOP;
  RETURN plan;
END $$;
\set guess 'SELECT 1 FROM %s WHERE parent_sha256 IS NULL AND tokens_sha256 = %L'
SELECT isnt(pg_temp.plan_of(format(:'guess', 'kvg.artifacts', :'alice_tokens'), :'alice_tokens'),
            pg_temp.plan_of(format(:'guess', 'kvg.artifacts', repeat('0', 64)), repeat('0', 64)),
            '(a reader of the table itself tells a stored prompt from one nobody stored by its plan)');
SET SESSION AUTHORIZATION tap_mallory;
SELECT is(pg_temp.plan_of(format(:'guess', 'kvg.readable_artifacts', :'alice_tokens'), :'alice_tokens'),
          pg_temp.plan_of(format(:'guess', 'kvg.readable_artifacts', repeat('0', 64)), repeat('0', 64)),
          'mallory''s EXPLAIN ANALYZE is the same for a prompt alice stored and one nobody did');
SELECT is(pg_temp.plan_of(format('SELECT 1 FROM kvg.readable_audit WHERE artifact_sha256 = %L', :'alice_note'),
                          :'alice_note'),
          pg_temp.plan_of(format('SELECT 1 FROM kvg.readable_audit WHERE artifact_sha256 = %L', repeat('0', 64)),
                          repeat('0', 64)),
          'and over kvg.readable_audit for an artifact alice captured and one nobody did');
SELECT throws_ok('SELECT count(*) FROM kvg.audit', '42501', NULL, 'a kvg_user does not read kvg.audit itself');
\set range 'SELECT sha256 FROM kvg.readable_artifacts WHERE sha256 >= ''0'' AND sha256 < ''g'''
SELECT pg_temp.plan_of(:'range') AS range_before, pg_temp.plan_of('SELECT * FROM kvg.storage_usage') AS usage_before \gset
SET SESSION AUTHORIZATION tap_alice;
SELECT kvg_capture('Alice adds one more private note, about the blue gate.') \g /dev/null
SET SESSION AUTHORIZATION tap_mallory;
SELECT is(pg_temp.plan_of(:'range'), :'range_before',
          'a range of hashes plans and counts the same after alice stores another artifact');
SELECT is(pg_temp.plan_of('SELECT * FROM kvg.storage_usage'), :'usage_before', 'so does kvg.storage_usage');
SELECT is((SELECT count(*) FROM kvg.storage_usage WHERE role <> 'tap_mallory'), 0::bigint,
          'which shows mallory her own row alone');
-- The engine worker's figures sum every user's calls: a graft of alice's
-- private artifact grew cache_bytes by exactly its size.
SELECT is((SELECT (pid IS NOT NULL, sequences, served, cache_bytes)::text FROM kvg.engine_worker), '(t,,,)',
          'mallory sees the engine worker, not its figures');
SET SESSION AUTHORIZATION tap_audit;
SELECT is((SELECT served IS NOT NULL AND cache_bytes IS NOT NULL FROM kvg.engine_worker), true,
          'an auditor sees them');

-- An operator of her own ahead of pg_catalog (the third review's attack):
-- mallory's `=` answers true for any two texts, and her search_path puts it
-- first, so an access check that resolved `=` as she does would find a root
-- she may read (she stored alice's secret too, above) from alice's
-- continuation, which is alice's alone. kvg resolves its statements' names in
-- pg_catalog whatever the caller's search_path (extension/src/spi/spi.hpp).
-- The calls run under her path and their outcomes are asserted after it is
-- reset, so that pgTAP's own comparisons never meet her operator.
RESET SESSION AUTHORIZATION;
CREATE SCHEMA tap_shadow AUTHORIZATION tap_mallory;
SET SESSION AUTHORIZATION tap_mallory;
SELECT kvg_capture('Mallory keeps a note of her own.') \g /dev/null
CREATE FUNCTION tap_shadow.always(text, text) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT true';
CREATE OPERATOR tap_shadow.= (LEFTARG = text, RIGHTARG = text, FUNCTION = tap_shadow.always);
-- More of her own, each counting its calls: <>, ||, lower and length.
CREATE SEQUENCE tap_shadow.calls;
CREATE FUNCTION tap_shadow.never(text, text) RETURNS boolean LANGUAGE sql
  AS 'SELECT pg_catalog.nextval(''tap_shadow.calls'') < 0';
CREATE OPERATOR tap_shadow.<> (LEFTARG = text, RIGHTARG = text, FUNCTION = tap_shadow.never);
CREATE FUNCTION tap_shadow.glue(text, text) RETURNS text LANGUAGE sql
  AS 'SELECT $2 WHERE pg_catalog.nextval(''tap_shadow.calls'') > 0';
CREATE OPERATOR tap_shadow.|| (LEFTARG = text, RIGHTARG = text, FUNCTION = tap_shadow.glue);
CREATE FUNCTION tap_shadow.lower(text) RETURNS text LANGUAGE sql
  AS 'SELECT ''''::text WHERE pg_catalog.nextval(''tap_shadow.calls'') > 0';
CREATE FUNCTION tap_shadow.length(text) RETURNS integer LANGUAGE sql
  AS 'SELECT 0 WHERE pg_catalog.nextval(''tap_shadow.calls'') > 0';
CREATE TEMP TABLE shadowed (call text, outcome text);
INSERT INTO shadowed (call) VALUES
  (format('SELECT kvg_export(%L)', :'alice_child')),
  (format('SELECT kvg_generate(%L, 4, %L)', ' She', :'alice_child')),
  (format('SELECT * FROM kvg_artifact_verify(%L)', :'alice_child')),
  (format('SELECT kvg_tokenize(%L, %L)', ' She', :'alice_child')),
  (format('SELECT * FROM kvg_graft_check(%L, %L)', :'alice_child', ' She')),
  (format('SELECT kvg_capture(%L, %L)', ' She', :'alice_child')),
  (format('SELECT * FROM kvg_generate_positional(ARRAY[%L], %L, 4)', :'alice_child', ' She'));
SET search_path = tap_shadow, pg_catalog, public;
SELECT 'mallory'::text = 'alice'::text AS shadow_answers \gset
DO $$
DECLARE
  r record;
BEGIN
  FOR r IN SELECT call FROM pg_temp.shadowed LOOP
    BEGIN
      EXECUTE r.call;
      UPDATE pg_temp.shadowed SET outcome = 'answered' WHERE call OPERATOR(pg_catalog.=) r.call;
    EXCEPTION WHEN OTHERS THEN
      UPDATE pg_temp.shadowed SET outcome = SQLSTATE WHERE call OPERATOR(pg_catalog.=) r.call;
    END;
  END LOOP;
END
$$;
RESET search_path;
SELECT is(:'shadow_answers'::text, 't', 'under her search_path, mallory''s = says two different texts are equal');
SELECT is(outcome, '42501', 'with her = ahead of pg_catalog, still refused: ' || left(call, 40))
FROM shadowed ORDER BY call;
SELECT is((SELECT is_called FROM tap_shadow.calls), false, 'and not one statement of kvg''s ran her <>, ||, lower or length');
RESET SESSION AUTHORIZATION;

SELECT * FROM finish();
ROLLBACK;
