-- Fills a database for the pg_dump/pg_restore round trip (scripts/pg-test.sh):
-- a chain of two artifacts, one spanning several large-object chunks, and
-- their audit rows.
\getenv fixtures KVG_FIXTURES
SELECT public.kvg_import(pg_read_binary_file(:'fixtures' || '/' || name || '.kvga'))
FROM unnest(ARRAY['root', 'child', 'large', 'dump']) WITH ORDINALITY AS f(name, n) ORDER BY n;
