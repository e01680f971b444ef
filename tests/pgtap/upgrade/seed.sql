-- A database as kvg 0.1.0 left it, for the upgrade test (scripts/pg-test.sh):
-- run after CREATE EXTENSION kvg VERSION '0.1.0' and before ALTER EXTENSION
-- kvg UPDATE. Rows are written the way 0.1.0 wrote them (its own SQL
-- functions and catalog columns), so that no 0.2.0 code is involved:
-- a captured chain of two artifacts, an imported artifact, their audit rows
-- (hash-chained by 0.1.0's kvg.audit_insert) and two library entries.
\getenv fixtures KVG_FIXTURES
CREATE TEMP TABLE fixture AS
  SELECT name, pg_read_binary_file(:'fixtures' || '/' || name || '.kvga') AS bytes,
         encode(sha256(pg_read_binary_file(:'fixtures' || '/' || name || '.kvga')), 'hex') AS sha
  FROM unnest(ARRAY['root', 'child', 'dedup']) AS name;

INSERT INTO kvg.artifacts (sha256, loid, bytes, parent_sha256, created_by)
SELECT f.sha, lo_from_bytea(0, f.bytes), length(f.bytes),
       CASE f.name WHEN 'child' THEN (SELECT sha FROM fixture WHERE name = 'root') END, current_user
FROM fixture f ORDER BY f.name = 'child';
-- (The test runs as the superuser that owns schema kvg, so the large objects
-- belong to the schema owner, as 0.1.0 made them.)
SELECT kvg.audit_insert(CASE f.name WHEN 'dedup' THEN 'import' ELSE 'capture' END, current_user, repeat('f', 64),
                        'f32-portable-v1', NULL, f.sha, NULL, NULL, NULL, NULL)
FROM fixture f ORDER BY f.name;
SELECT kvg.audit_insert('answer', current_user, repeat('f', 64), 'f32-portable-v1', repeat('1', 64), NULL,
                        encode(sha256(convert_to('red', 'UTF8')), 'hex'), NULL, 12, 1, 11, 'recurring', NULL, true,
                        'red', 5, 6, 7);

INSERT INTO kvg.knowledge (question, question_key, solution, answer, verifier, evidence, verified_by, artifact_sha256)
SELECT q, kvg.question_key(q), 'Lily had a red ball.', 'red', v, 'seeded by the upgrade test', current_user,
       (SELECT sha FROM fixture WHERE name = 'child')
FROM (VALUES ('What colour was Lily''s ball?', 'contains'),
             ('What did Lily have?', 'public.upgrade_verifier')) AS e(q, v);
