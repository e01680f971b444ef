-- The audit trail: append-only, and a hash chain that a third party can
-- recompute from docs/audit-chain.md and that exposes any tampering.
BEGIN;
SELECT plan(39);
\ir fixtures.psql
\ir audit_encoding.psql
SELECT kvg_import(pg_temp.fixture('root'), verify => false) \g /dev/null  -- an artifact row to try to change

-- A few rows with NULLs, non-ASCII text and numbers.
CREATE TEMP TABLE appended AS
SELECT kvg.audit_insert(op, 'postgres', fp, 'f32-portable-v1', repeat('1', 64), NULL, NULL, NULL, t_in, t_out) AS id
FROM (VALUES ('import', repeat('a', 64), NULL::int, NULL::int),
             ('génération ✓', NULL, 12, 34),
             ('capture', repeat('b', 64), 7, NULL),
             ('generate', repeat('c', 64), 5, 64)) AS v(op, fp, t_in, t_out);
-- ... and one with every flywheel field, a multi-line output among them.
INSERT INTO appended
SELECT kvg.audit_insert('answer', 'postgres', repeat('d', 64), 'f32-portable-v1', repeat('2', 64), repeat('3', 64),
                        encode(sha256(convert_to(E'red\nball', 'UTF8')), 'hex'), NULL, 40, 3, 39, 'recurring', 7,
                        false, E'red\nball', 812, 35, 410);
SELECT is(count(*), 5::bigint, 'five rows appended') FROM appended;
SELECT is((public.kvg_audit_verify()).ok, true, 'the chain verifies');

-- The documented encoding, written out independently of kvg.audit_row_hash.
SELECT is(count(*), (SELECT count(*) FROM kvg.audit), 'every row_hash matches the documented encoding')
FROM kvg.audit a WHERE a.row_encoding = 'kvg-audit-v4' AND a.row_hash = pg_temp.documented_row_hash(a);
SELECT is(prev_hash, repeat('0', 64), 'the first row links to 64 zeros')
FROM kvg.audit ORDER BY seq LIMIT 1;
SELECT is(count(*), 0::bigint, 'each prev_hash is the previous row_hash')
FROM (SELECT prev_hash, lag(row_hash) OVER (ORDER BY seq) AS previous FROM kvg.audit) c
WHERE previous IS NOT NULL AND prev_hash <> previous;
SELECT is(array_agg(seq ORDER BY seq), array_agg(n ORDER BY n), 'seq numbers the chain 1, 2, ... without gaps')
FROM (SELECT seq, row_number() OVER (ORDER BY seq) AS n FROM kvg.audit) c;
SELECT is((SELECT last_hash FROM kvg.audit_head), (SELECT row_hash FROM kvg.audit ORDER BY seq DESC LIMIT 1),
          'the head holds the last row_hash');

-- Append-only, for everyone (the owner included).
SELECT throws_ok($$UPDATE kvg.audit SET tokens_out = 0$$, '42501', NULL, 'UPDATE is refused');
SELECT throws_ok($$DELETE FROM kvg.audit WHERE false$$, '42501', NULL, 'DELETE is refused, even of no rows');
SELECT throws_ok($$TRUNCATE kvg.audit$$, '42501', NULL, 'TRUNCATE is refused');
SELECT throws_ok($$UPDATE kvg.artifacts SET recipe = 'x'$$, '42501', NULL, 'artifact rows are immutable too');
SELECT throws_ok($$UPDATE kvg.artifacts SET provenance = 'computed', recipe = 'x'$$, '42501', NULL,
                 'an unverified artifact may become trusted, but nothing else of it may change');

-- A superuser can switch the trigger off; the chain still tells.
ALTER TABLE kvg.audit DISABLE TRIGGER audit_append_only;
CREATE TEMP TABLE ids AS
  SELECT a.id, a.seq, row_number() OVER (ORDER BY a.seq) AS n FROM appended JOIN kvg.audit a USING (id);

SAVEPOINT tamper;
UPDATE kvg.audit SET tokens_out = 35 WHERE id = (SELECT id FROM ids WHERE n = 2);
SELECT is((public.kvg_audit_verify()).first_bad, (SELECT seq FROM ids WHERE n = 2), 'a changed field is found');
SELECT is(v.ok || ' ' || v.first_bad || ' ' || v.reason,
          'false ' || (SELECT seq FROM ids WHERE n = 2) || ' its row_hash is not the hash of its fields (the row was changed)',
          'kvg_audit_verify names its seq and why')
FROM public.kvg_audit_verify() v;
ROLLBACK TO tamper;

UPDATE kvg.audit SET tokens_out = 35 WHERE id = (SELECT id FROM ids WHERE n = 2);
UPDATE kvg.audit a SET row_hash = kvg.audit_row_hash(a) WHERE id = (SELECT id FROM ids WHERE n = 2);
SELECT is((public.kvg_audit_verify()).first_bad, (SELECT seq FROM ids WHERE n = 3),
          'a changed field with a recomputed row_hash breaks the next link');
ROLLBACK TO tamper;

DELETE FROM kvg.audit WHERE id = (SELECT id FROM ids WHERE n = 2);
SELECT is((public.kvg_audit_verify()).first_bad, (SELECT seq FROM ids WHERE n = 3), 'a deleted row breaks the next link');
ROLLBACK TO tamper;

DELETE FROM kvg.audit WHERE id = (SELECT id FROM ids WHERE n = 5);
SELECT is((public.kvg_audit_verify()).first_bad, (SELECT seq FROM ids WHERE n = 5), 'a cut tail is found through the head');
SELECT is(reason, 'the rows up to the head''s last_seq are gone (cut off)', 'and said to be cut off')
FROM public.kvg_audit_verify();
ROLLBACK TO tamper;

UPDATE kvg.audit SET output_text = E'red\nbal' WHERE id = (SELECT id FROM ids WHERE n = 5);
SELECT is((public.kvg_audit_verify()).first_bad, (SELECT seq FROM ids WHERE n = 5), 'a changed output text is found');
ROLLBACK TO tamper;

INSERT INTO kvg.audit (id, seq, at, role, operation, prev_hash, row_hash)
VALUES (nextval('kvg.audit_id_seq'), (SELECT last_seq + 1 FROM kvg.audit_head), now(), 'postgres', 'forged',
        (SELECT last_hash FROM kvg.audit_head), 'x');
UPDATE kvg.audit a SET row_hash = kvg.audit_row_hash(a) WHERE operation = 'forged';
SELECT is((public.kvg_audit_verify()).first_bad, (SELECT seq FROM kvg.audit WHERE operation = 'forged'),
          'a well-formed row appended behind the head''s back is found');
ROLLBACK TO tamper;

DELETE FROM kvg.audit_head;
SELECT is((public.kvg_audit_verify()).first_bad, (SELECT seq FROM kvg.audit ORDER BY seq LIMIT 1), 'a missing head is found');
ROLLBACK TO tamper;

-- From a checkpoint (the row of n = 3 and its row_hash, recorded earlier):
-- only the rows after it are read.
SELECT seq AS cp_seq, row_hash AS cp_hash FROM kvg.audit WHERE id = (SELECT id FROM ids WHERE n = 3) \gset
SELECT is((public.kvg_audit_verify(:cp_seq, :'cp_hash')).ok, true, 'from a checkpoint, the rows after it verify');
SELECT is((public.kvg_audit_verify(:cp_seq, upper(:'cp_hash'))).ok, true, '(its hash in either case)');
UPDATE kvg.audit SET tokens_out = 35 WHERE id = (SELECT id FROM ids WHERE n = 4);
SELECT is((public.kvg_audit_verify(:cp_seq, :'cp_hash')).first_bad, (SELECT seq FROM ids WHERE n = 4),
          'a changed row after the checkpoint is found');
ROLLBACK TO tamper;
UPDATE kvg.audit SET tokens_out = 35 WHERE id = (SELECT id FROM ids WHERE n = 2);
SELECT is((public.kvg_audit_verify(:cp_seq, :'cp_hash')).ok, true,
          'a changed row before it is not read (it was verified when the checkpoint was taken) ...');
SELECT is((public.kvg_audit_verify()).first_bad, (SELECT seq FROM ids WHERE n = 2),
          '... and a full verification finds it');
ROLLBACK TO tamper;
UPDATE kvg.audit SET tokens_out = 35 WHERE id = (SELECT id FROM ids WHERE n = 3);
UPDATE kvg.audit a SET row_hash = kvg.audit_row_hash(a) WHERE id = (SELECT id FROM ids WHERE n = 3);
SELECT is(v.first_bad || ' ' || v.reason,
          :cp_seq || ' the checkpoint''s row is gone or no longer carries the row_hash recorded for it',
          'the checkpoint''s own row rewritten (its hash recomputed) is found')
FROM public.kvg_audit_verify(:cp_seq, :'cp_hash') v;
ROLLBACK TO tamper;
SELECT is((public.kvg_audit_verify(:cp_seq, repeat('e', 64))).first_bad, :cp_seq::bigint,
          'a checkpoint hash the chain never had is refused');
SELECT is((public.kvg_audit_verify(h.last_seq, h.last_hash)).ok, true, 'the head itself is a checkpoint (no new rows)')
FROM kvg.audit_head h;
SELECT throws_ok(format('SELECT public.kvg_audit_verify(%s, NULL)', :cp_seq), '22023',
                 'a checkpoint is a row and its row_hash: give both after_seq and after_hash, or neither',
                 'a checkpoint needs both its seq and its hash');
SELECT throws_ok($$SELECT public.kvg_audit_verify(3, 'abc')$$, '22023', NULL, 'and a hash that is one');

-- The manifest as JSON Lines: a header, then the rows of kvg_manifest, one per line.
SELECT is((SELECT l::jsonb - 'head' FROM public.kvg_manifest_lines(2, NULL) l LIMIT 1),
          '{"format": "kvg-manifest-lines-v1", "from_seq": 2, "to_seq": null}'::jsonb, 'kvg_manifest_lines: a header line');
SELECT is(ARRAY(SELECT l::jsonb FROM public.kvg_manifest_lines() l OFFSET 1),
          ARRAY(SELECT jsonb_array_elements(public.kvg_manifest() -> 'entries')),
          'then kvg_manifest''s entries, in chain order, one per line');
SELECT is((SELECT l::jsonb -> 'head' FROM public.kvg_manifest_lines() l LIMIT 1), public.kvg_manifest() -> 'head',
          'its header names the head');

ALTER TABLE kvg.audit ENABLE TRIGGER audit_append_only;
SELECT is((public.kvg_audit_verify()).ok, true, 'untouched, the chain verifies again');
SELECT ok(first_bad IS NULL AND reason IS NULL, 'and names no row and no reason')
FROM public.kvg_audit_verify();

-- Appending continues from the head.
SELECT kvg.audit_insert('after', 'postgres', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL) AS last_id \gset
SELECT is((SELECT prev_hash FROM kvg.audit WHERE id = :last_id),
          (SELECT row_hash FROM kvg.audit WHERE id = (SELECT id FROM ids WHERE n = 5)), 'a new row links to the last one');
SELECT is((public.kvg_audit_verify()).ok, true, 'and the chain still verifies');
SELECT cmp_ok((SELECT seq FROM kvg.audit WHERE id = :last_id), '>', (SELECT max(seq) FROM kvg.audit WHERE id <> :last_id),
              'the new row is the chain''s last');

SELECT * FROM finish();
ROLLBACK;
