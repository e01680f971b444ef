-- Runs in the database restored from a dump of seed.sql's (scripts/pg-test.sh):
-- artifacts, their large objects and the audit chain came through intact,
-- and the restored extension keeps working.
BEGIN;
SELECT plan(19);
\ir ../fixtures.psql

SELECT is((SELECT count(*) FROM kvg.artifacts), 8::bigint, 'eight artifacts restored (four imported, four learned)');
SELECT is((SELECT count(*) FROM kvg.artifacts WHERE (public.kvg_artifact_verify(sha256)).ok), 8::bigint,
          'every restored artifact verifies');
SELECT is((SELECT count(*) FROM fixture f JOIN kvg.artifacts a ON a.sha256 = encode(sha256(f.bytes), 'hex')
           WHERE public.kvg_export(a.sha256) = f.bytes), 4::bigint, 'exports equal the original bytes');
SELECT is((SELECT parent_sha256 FROM kvg.artifacts WHERE sha256 = pg_temp.fixture_sha('child')),
          pg_temp.fixture_sha('root'), 'the chain link survives');
SELECT is(pg_temp.orphan_objects(), 0::bigint, 'no orphan large objects');
SELECT is((SELECT array_agg(row(role, artifacts, bytes)::text) FROM kvg.storage_usage),
          ARRAY[row('postgres', 8, (SELECT sum(bytes) FROM kvg.artifacts))::text],
          'the storage charges are restored: the eight artifacts, charged to the role that stored them');
SELECT is((SELECT s.bytes + coalesce((SELECT sum(j.bytes) FROM kvg.storage_adjustments j WHERE j.role = s.role), 0)
           FROM kvg.storage_accounts s WHERE s.role = 'postgres'),
          (SELECT sum(bytes) FROM kvg.artifacts), 'and so is the running total the audit writer checks');
SELECT is((SELECT count(*) FILTER (WHERE operation <> 'export') || ' restored, ' ||
                  count(*) FILTER (WHERE operation = 'export') || ' exports' FROM kvg.audit),
          '6 restored, 4 exports', 'six audit rows restored, and the four exports above audited');
SELECT is((SELECT lexemes FROM kvg.knowledge WHERE verifier = 'contains'),
          ARRAY['ball', 'colour', 'day', 'everi', 'lili', 'play', 'red'],
          'the library entries are restored, their generated column too');
\getenv data KVG_TEST_DATA
SELECT set_config('kvg.model', :'data' || '/models/stories260K.gguf', true) \g /dev/null
SELECT set_config('kvg.device', 'cpu', true) \g /dev/null
SELECT is(mode || ' ' || artifact, 'recurring ' || (SELECT artifact_sha256 FROM kvg.knowledge WHERE verifier = 'contains'),
          'a recurring answer grafts the restored artifact')
FROM public.kvg_answer_detail('What colour was Lily''s ball?', 4);
SELECT is(tokens_prefilled, 1, 'and computes only the last prompt token again')
FROM public.kvg_answer_detail('What colour was Lily''s ball?', 4);
SELECT is((public.kvg_audit_verify()).ok, true, 'the restored chain verifies');
SELECT is(kvg.function_pin((verifier_frozen || '(text, text)')::regprocedure), verifier_pin,
          'a function verifier''s frozen copy is restored, pinned as deposited')
FROM kvg.knowledge WHERE verifier <> 'contains';
SELECT is(verified, true, 'and verifies answers in the restored database')
FROM public.kvg_answer_detail('Where did the toy boat float?', 4);
-- Owners and the library's publication come through (docs/security.md, section 9).
SELECT is((SELECT count(*) FROM kvg.artifacts a WHERE NOT EXISTS (SELECT FROM kvg.artifact_claims c
           WHERE c.sha256 = a.sha256 AND c.claimed_by = 'postgres')), 0::bigint,
          'every restored artifact keeps its owner''s claim');
CREATE TEMP TABLE library_chain ON COMMIT DROP AS
  WITH RECURSIVE c AS (SELECT a.sha256, a.parent_sha256 FROM kvg.artifacts a JOIN kvg.knowledge k
                       ON k.artifact_sha256 = a.sha256
                       UNION SELECT a.sha256, a.parent_sha256 FROM kvg.artifacts a JOIN c ON a.sha256 = c.parent_sha256)
  SELECT array_agg(sha256 ORDER BY sha256) AS chain FROM c;
GRANT SELECT ON library_chain TO PUBLIC;
CREATE ROLE tap_restore_reader IN ROLE kvg_user;
SET SESSION AUTHORIZATION tap_restore_reader;
SELECT is((SELECT array_agg(sha256 ORDER BY sha256) FROM kvg.readable_artifacts), (SELECT chain FROM library_chain),
          'another user sees only the library''s chain');
RESET SESSION AUTHORIZATION;

SELECT max(id) AS last_id, (SELECT row_hash FROM kvg.audit ORDER BY id DESC LIMIT 1) AS last_hash
FROM kvg.audit \gset
SELECT is(public.kvg_import(pg_temp.fixture('dedup'), verify => false), pg_temp.fixture_sha('dedup'), 'import works after restore');
SELECT is((SELECT prev_hash FROM kvg.audit WHERE id > :last_id), :'last_hash',
          'the next audit row continues the restored chain');
SELECT is((public.kvg_audit_verify()).ok, true, 'and the chain still verifies');

SELECT * FROM finish();
ROLLBACK;
