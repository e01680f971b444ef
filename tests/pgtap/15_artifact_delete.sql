-- kvg_artifact_delete (docs/operations.md, "Deleting an artifact"): it
-- refuses, naming them, an artifact that a library entry, a stored
-- continuation or an audited graft needs; force => true deletes it with its
-- continuations and their library entries and keeps every audit row; the
-- large objects go with the rows and the audit chain still verifies.
BEGIN;
SELECT plan(22);
\ir small_model.psql
-- Every capture below is a root unless it names its parent.
SELECT set_config('kvg.prefix_reuse', 'off', true) \g /dev/null

CREATE FUNCTION pg_temp.stored(sha text) RETURNS boolean LANGUAGE sql AS $$
  SELECT EXISTS (SELECT FROM kvg.artifacts WHERE sha256 = sha)
$$;
CREATE FUNCTION pg_temp.object_of(sha text) RETURNS oid LANGUAGE sql AS $$
  SELECT loid FROM kvg.artifacts WHERE sha256 = sha
$$;

-- What earlier files' rolled-back calls left (continuations of the roots
-- below among them: docs/audit-chain.md, "Artifacts") goes first.
SELECT public.kvg_vacuum() \g /dev/null

SELECT is(public.kvg_artifact_delete(NULL), NULL, 'NULL: NULL');
SELECT is(public.kvg_artifact_delete('  '), NULL, 'blank: NULL');
SELECT throws_ok($$SELECT public.kvg_artifact_delete('not a hash')$$, '22023', NULL, 'a malformed hash: 22023');
SELECT throws_ok(format('SELECT public.kvg_artifact_delete(%L)', repeat('ab', 32)), '42704',
                 format('artifact %s is not stored', repeat('ab', 32)), 'an artifact not stored: 42704');

-- A capture nobody grafted: deleted, with its large object.
SELECT public.kvg_capture('The old dog slept in the sun all afternoon') AS lone \gset
SELECT pg_temp.object_of(:'lone') AS lone_object, (SELECT bytes FROM kvg.artifacts WHERE sha256 = :'lone') AS lone_bytes \gset
SELECT is(public.kvg_artifact_delete(:'lone'), :lone_bytes::bigint, 'a capture nobody grafted is deleted: its bytes are returned');
SELECT ok(NOT pg_temp.stored(:'lone') AND NOT EXISTS (SELECT FROM pg_largeobject_metadata WHERE oid = :lone_object),
          'its row and its large object are gone');
SELECT ok(EXISTS (SELECT FROM kvg.audit WHERE operation = 'capture' AND artifact_sha256 = :'lone'),
          'the audit row of its capture is kept');

-- A chain: root <- child <- grandchild.
SELECT public.kvg_capture('Long ago, in a small town') AS root \gset
SELECT public.kvg_capture(', there was a cat', :'root') AS child \gset
SELECT public.kvg_capture(' named Tom.', :'child') AS grandchild \gset
SELECT throws_ok(format('SELECT public.kvg_artifact_delete(%L)', :'root'), '2BP01', NULL,
                 'the parent of a stored artifact is refused: 2BP01');
SELECT throws_like(format('SELECT public.kvg_artifact_delete(%L)', :'root'),
                   format('%%it is the parent of 1 stored artifact (%s)%%', :'child'), 'naming the continuation');

-- An audited graft of the grandchild.
SELECT public.kvg_generate(' He liked', 4, :'grandchild') \g /dev/null
SELECT throws_like(format('SELECT public.kvg_artifact_delete(%L)', :'grandchild'),
                   '%1 audit row grafted it (generate; the first is id %', 'an artifact an audited call grafted is refused');

-- A library entry's artifact.
SELECT public.kvg_learn('What colour was the ball?', 'contains', 'Sam had a red ball. Sam threw the red ball.', 'red') AS entry \gset
SELECT artifact_sha256 AS entry_artifact FROM kvg.knowledge WHERE id = :entry \gset
SELECT throws_like(format('SELECT public.kvg_artifact_delete(%L)', :'entry_artifact'),
                   format('%%it is the artifact of library entry %s (''What colour was the ball?'')%%', :entry),
                   'a library entry''s artifact is refused, naming the entry');
SELECT ok(pg_temp.stored(:'root') AND pg_temp.stored(:'grandchild') AND pg_temp.stored(:'entry_artifact'),
          'nothing refused was deleted');

-- force => true: the whole chain below the root goes, and the audit stays.
SELECT count(*) AS audit_rows FROM kvg.audit \gset
SELECT sum(bytes) AS chain_bytes FROM kvg.artifacts WHERE sha256 IN (:'root', :'child', :'grandchild') \gset
SELECT is(public.kvg_artifact_delete(:'root', force => true), :chain_bytes::bigint,
          'forced: the root and its continuations, their bytes returned');
SELECT ok(NOT pg_temp.stored(:'root') AND NOT pg_temp.stored(:'child') AND NOT pg_temp.stored(:'grandchild'),
          'forced: root, child and grandchild are gone');
SELECT bytes AS entry_bytes FROM kvg.artifacts WHERE sha256 = :'entry_artifact' \gset
SELECT is(public.kvg_artifact_delete(:'entry_artifact', true), :entry_bytes::bigint,
          'forced: a library entry''s artifact is deleted');
SELECT ok(NOT EXISTS (SELECT FROM kvg.knowledge WHERE id = :entry), 'with its library entry');
SELECT is(public.kvg_answer('What colour was the ball?', 4) IS NOT NULL, true,
          'the question is answered again without that entry (cold)');
SELECT ok((SELECT count(*) FROM kvg.audit) > :audit_rows, 'no audit row was removed (the answer added one)');
SELECT ok((SELECT count(*) FROM kvg.audit WHERE artifact_sha256 IN (:'root', :'grandchild', :'entry_artifact')) >= 4,
          'the rows naming deleted artifacts are among them (captures, the graft, the learn)');
SELECT ok((public.kvg_audit_verify()).ok, 'the audit chain verifies');
SELECT is_empty('SELECT * FROM public.kvg_orphans()', 'no orphans either way');
SELECT is((SELECT count(*) FROM pg_largeobject_metadata m WHERE NOT EXISTS (SELECT FROM kvg.artifacts a WHERE a.loid = m.oid)),
          0::bigint, 'every large object has its row');

SELECT * FROM finish();
ROLLBACK;
