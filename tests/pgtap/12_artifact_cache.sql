-- The verified-artifact cache (docs/artifact-lifecycle.md): a second graft of
-- an artifact is served from this backend's cache, with the same output as
-- with the cache off; a deleted and re-stored artifact is read afresh, never
-- served from a stale entry; kvg.artifact_cache_memory bounds it and only a
-- superuser sets it.
BEGIN;
SELECT plan(17);
\getenv data KVG_TEST_DATA
\set small :data '/models/stories260K.gguf'
SELECT set_config('kvg.model', :'small', true) \g /dev/null
SELECT set_config('kvg.device', 'cpu', true) \g /dev/null
SELECT set_config('kvg.artifact_cache_memory', '64MB', true) \g /dev/null
-- This backend's own cache: the engine worker keeps one of its own
-- (tests/concurrency/engine_worker_test.sh), so calls run here.
SELECT set_config('kvg.engine', 'backend', true) \g /dev/null

CREATE FUNCTION pg_temp.cache(field text) RETURNS bigint LANGUAGE sql AS $$
  SELECT (to_jsonb(c) ->> field)::bigint FROM kvg.artifact_cache c
$$;

SELECT public.kvg_capture('Once upon a time there was a girl') AS a \gset
SELECT public.kvg_generate(' who', 12, :'a') AS first_answer \gset
SELECT pg_temp.cache('hits') AS hits1, pg_temp.cache('misses') AS misses1 \gset
SELECT is(public.kvg_generate(' who', 12, :'a'), :'first_answer', 'a second graft gives the same output');
SELECT is(pg_temp.cache('misses'), :misses1::bigint, 'the second graft reads no large object into the cache');
SELECT ok(pg_temp.cache('hits') > :hits1, 'the second graft is served from the cache');
SELECT is(pg_temp.cache('bytes'), (SELECT bytes FROM kvg.artifacts WHERE sha256 = :'a'),
          'the cache holds the artifact''s bytes');

-- A recurring library answer, cache on and off.
SELECT public.kvg_learn('What colour was Nora''s kite?', 'contains', 'Nora had a yellow kite. Nora flew her yellow kite every day.',
                        'yellow') \g /dev/null
SELECT answer AS cached_answer, graft_ms FROM public.kvg_answer_detail('What colour was Nora''s kite?', 6) \gset
SELECT pg_temp.cache('hits') AS hits2 \gset
SELECT is((SELECT mode FROM public.kvg_answer_detail('What colour was Nora''s kite?', 6)), 'recurring',
          'a recurring answer');
SELECT ok(pg_temp.cache('hits') > :hits2, 'a recurring answer grafts from the cache');
SELECT set_config('kvg.artifact_cache_memory', '0', true) \g /dev/null
SELECT is((SELECT answer FROM public.kvg_answer_detail('What colour was Nora''s kite?', 6)), :'cached_answer',
          'cache off: the same recurring answer');
SELECT is(public.kvg_generate(' who', 12, :'a'), :'first_answer', 'cache off: the same graft output');
SELECT is(pg_temp.cache('entries'), 0::bigint, 'cache off: nothing held');

-- Deleted and re-stored: never served from the entry of the deleted row.
SELECT set_config('kvg.artifact_cache_memory', '64MB', true) \g /dev/null
SELECT public.kvg_generate(' who', 12, :'a') \g /dev/null
SELECT loid AS old_loid FROM kvg.artifacts WHERE sha256 = :'a' \gset
DELETE FROM kvg.artifacts WHERE sha256 = :'a';
SELECT throws_ok(format('SELECT public.kvg_generate(%L, 12, %L)', ' who', :'a'), '42704', NULL,
                 'a deleted artifact is not served from the cache');
SELECT is(public.kvg_capture('Once upon a time there was a girl'), :'a', 'the same content stored again');
SELECT pg_temp.cache('misses') AS misses3 \gset
SELECT is(public.kvg_generate(' who', 12, :'a'), :'first_answer', 'the re-stored artifact grafts the same output');
SELECT is(pg_temp.cache('misses'), :misses3::bigint + 1, 'the re-stored artifact was read afresh');

-- The bound: room for one of two artifacts of about the same size.
SELECT public.kvg_capture('Lily found a red ball in the big garden') AS b \gset
SELECT greatest(a.bytes, b.bytes) * 3 / 2 / 1024 + 1 AS bound_kb, a.bytes + b.bytes AS both_bytes
FROM kvg.artifacts a, kvg.artifacts b WHERE a.sha256 = :'a' AND b.sha256 = :'b' \gset
SELECT set_config('kvg.artifact_cache_memory', :'bound_kb', true) \g /dev/null
SELECT pg_temp.cache('evictions') AS evictions0 \gset
SELECT public.kvg_generate(' who', 4, :'a'), public.kvg_generate(' who', 4, :'b') \g /dev/null
SELECT ok(:bound_kb * 1024 < :both_bytes, 'the bound holds one of the two, not both');
SELECT ok(pg_temp.cache('entries') = 1 AND pg_temp.cache('bytes') <= pg_temp.cache('capacity')
          AND pg_temp.cache('capacity') = :bound_kb * 1024, 'the cache stays within kvg.artifact_cache_memory');
SELECT ok(pg_temp.cache('evictions') > :evictions0, 'the least recently used artifact was evicted');

CREATE ROLE tap_cache_user IN ROLE kvg_user;
SET ROLE tap_cache_user;
SELECT throws_ok($$SET kvg.artifact_cache_memory = '1GB'$$, '42501', NULL,
                 'only a superuser sets kvg.artifact_cache_memory');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
