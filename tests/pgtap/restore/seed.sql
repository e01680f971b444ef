-- Fills a database for the pg_dump/pg_restore round trip (scripts/pg-test.sh):
-- a chain of two artifacts, one spanning several large-object chunks, and
-- their audit rows; two library entries, one checked by a function verifier
-- (frozen into kvg_frozen at deposit: the copy must come through).
\getenv fixtures KVG_FIXTURES
SELECT public.kvg_import(pg_read_binary_file(:'fixtures' || '/' || name || '.kvga'), verify => false)
FROM unnest(ARRAY['root', 'child', 'large', 'dump']) WITH ORDINALITY AS f(name, n) ORDER BY n;
-- A library entry: its row (with a generated column), its artifact chain and
-- its audit row.
\getenv data KVG_TEST_DATA
SELECT set_config('kvg.model', :'data' || '/models/stories260K.gguf', false);
SELECT set_config('kvg.device', 'cpu', false);
SELECT public.kvg_learn('What colour was Lily''s ball?', 'contains', 'Lily had a red ball. She played with it every day.', 'red');
CREATE SCHEMA seed_v;
CREATE FUNCTION seed_v.words(a text) RETURNS text LANGUAGE sql RETURN lower(a);
CREATE FUNCTION seed_v.has_words(q text, a text) RETURNS boolean LANGUAGE sql RETURN seed_v.words(a) ~ '[[:alnum:]]';
SELECT public.kvg_learn('Where did the toy boat float?', 'seed_v.has_words', 'The toy boat floated on the pond.', 'pond');
