-- No orphans (docs/artifact-lifecycle.md): DROP EXTENSION kvg unlinks every
-- artifact's large object (and a rolled-back drop keeps them); kvg_orphans()
-- reports orphans both ways and kvg_vacuum() removes objects without a row.
-- Runs last but one: it drops and re-creates the extension.
SELECT plan(16);
\getenv data KVG_TEST_DATA
SET kvg.device = 'cpu';
SELECT set_config('kvg.model', :'data' || '/models/stories260K.gguf', false) \g /dev/null
CREATE FUNCTION pg_temp.objects() RETURNS integer LANGUAGE sql AS $$ SELECT count(*)::integer FROM pg_largeobject_metadata $$;
-- Somebody else's large object, never touched.
SELECT lo_from_bytea(0, '\x4b56474100'::bytea) AS foreign_lo \gset
ALTER LARGE OBJECT :foreign_lo OWNER TO kvg_user;
SELECT pg_temp.objects() AS base \gset

SELECT kvg_capture('Once upon a time') AS a \gset
SELECT kvg_capture(' there was a girl', :'a') AS b \gset
SELECT is(pg_temp.objects(), :base + 2, 'two captures, two large objects');
SELECT is_empty('SELECT * FROM kvg_orphans()', 'no orphans while rows and objects agree');

-- A drop that rolls back keeps everything.
BEGIN;
SET LOCAL client_min_messages = warning;
DROP EXTENSION kvg CASCADE;
SELECT is(pg_temp.objects(), :base + 0, 'inside the drop: the artifacts'' objects are unlinked');
ROLLBACK;
SELECT is(pg_temp.objects(), :base + 2, 'a rolled-back drop keeps the objects');
SELECT is((kvg_artifact_verify(:'b')).ok, true, 'and they still verify');

-- Orphans both ways, made by hand.
SELECT lo_from_bytea(0, kvg_export(:'a')) AS copy_lo \gset
SELECT lo_from_bytea(0, 'not an artifact'::bytea) AS other_lo \gset
SELECT results_eq($$SELECT kind, loid::bigint FROM kvg_orphans()$$,
                  format($$VALUES ('object_without_row', %s::bigint)$$, :copy_lo),
                  'an artifact object without a row is reported; other objects are not');
BEGIN;
ALTER TABLE kvg.artifacts DISABLE TRIGGER artifacts_unlink;
SELECT loid AS b_loid FROM kvg.artifacts WHERE sha256 = :'b' \gset
SELECT lo_unlink(:b_loid) \g /dev/null
SELECT results_eq($$SELECT kind, artifact FROM kvg_orphans() WHERE kind = 'row_without_object'$$,
                  format($$VALUES ('row_without_object', %L)$$, :'b'), 'a row without its object is reported');
ROLLBACK;
SELECT is(kvg_vacuum(), 1::bigint, 'kvg_vacuum unlinks the one object without a row');
SELECT is_empty('SELECT * FROM kvg_orphans()', 'no orphans after kvg_vacuum');
SELECT ok(EXISTS (SELECT FROM pg_largeobject_metadata WHERE oid = :other_lo), 'a non-artifact object is kept');
SELECT ok(EXISTS (SELECT FROM pg_largeobject_metadata WHERE oid = :foreign_lo), 'another role''s object is kept');
SELECT lo_unlink(:other_lo) \g /dev/null

-- The drop itself, then the demo's re-run: no doubling.
SELECT pg_temp.objects() AS before_drop \gset
SET client_min_messages = warning;
DROP EXTENSION kvg CASCADE;
RESET client_min_messages;
SELECT is(pg_temp.objects(), :before_drop - 2, 'DROP EXTENSION kvg unlinks the artifacts'' objects');
SELECT ok(EXISTS (SELECT FROM pg_largeobject_metadata WHERE oid = :foreign_lo), 'and nothing else');
CREATE EXTENSION kvg;
SELECT set_config('kvg.model', :'data' || '/models/stories260K.gguf', false) \g /dev/null
SELECT is(kvg_capture('Once upon a time'), :'a', 'captured again after re-creating the extension');
SELECT is(pg_temp.objects(), :before_drop - 1, 'one object for one artifact: nothing doubled');
-- DROP SCHEMA kvg CASCADE goes the same way.
SET client_min_messages = warning;
DROP SCHEMA kvg CASCADE;
RESET client_min_messages;
SELECT is(pg_temp.objects(), :before_drop - 2, 'DROP SCHEMA kvg CASCADE unlinks them too');
CREATE EXTENSION kvg;
SELECT lo_unlink(:foreign_lo) \g /dev/null
SELECT * FROM finish();
