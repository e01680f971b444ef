-- The DROP EXTENSION guard (extension/src/artifacts/drop_guard.cpp) acts only for a
-- role that may drop the extension: anyone else's DROP EXTENSION kvg or
-- DROP SCHEMA kvg CASCADE is refused by PostgreSQL having cost nothing and
-- told nothing (before, it unlinked every artifact's large object with the
-- owner's rights, emptied the backend's artifact cache and said how many
-- objects it unlinked). The owner's drop is tests/pgtap/reliability/02_orphans.sql.
BEGIN;
SELECT plan(5);
\getenv data KVG_TEST_DATA
SELECT set_config('kvg.model', :'data' || '/models/stories260K.gguf', true) \g /dev/null
SET LOCAL kvg.device = 'cpu';

CREATE ROLE tap_stranger;  -- no kvg grants at all
SELECT kvg_capture('Once upon a time') AS a \gset
-- The graft fills this backend's artifact cache.
SELECT kvg_generate(' there', 2, :'a') \g /dev/null
SELECT entries AS cached FROM kvg.artifact_cache \gset
SELECT cmp_ok(:cached::bigint, '>', 0::bigint, 'the backend''s artifact cache holds the grafted artifact');

SET LOCAL ROLE tap_stranger;
SELECT throws_ok('DROP EXTENSION kvg', '42501', 'must be owner of extension kvg',
                 'a stranger''s DROP EXTENSION is refused by PostgreSQL');
SELECT throws_ok('DROP SCHEMA kvg CASCADE', '42501', 'must be owner of schema kvg',
                 'a stranger''s DROP SCHEMA kvg CASCADE too');
RESET ROLE;
SELECT is((SELECT entries FROM kvg.artifact_cache), :cached::bigint,
          'the guard did nothing for them: the artifact cache it would have emptied is intact');
SELECT is((kvg_artifact_verify(:'a')).ok, true, 'and the artifact is whole');

SELECT * FROM finish();
ROLLBACK;
