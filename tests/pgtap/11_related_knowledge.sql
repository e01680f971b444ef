-- Transfer routing (kvg.related_knowledge) probes the GIN index with the
-- question's rarest lexemes only (docs/library-scale.md). That changes the
-- work, never the result: here it is compared with the plain query (every
-- lexeme of the question a probe) for
-- many questions and thresholds, with and without column statistics, and
-- the index is what the query runs on.
BEGIN;
SELECT plan(4);
\getenv data KVG_TEST_DATA
SELECT set_config('kvg.model', :'data' || '/models/stories260K.gguf', true) \g /dev/null
SET LOCAL kvg.device = 'cpu';

SELECT count(kvg_learn(q, 'contains', s, a)) AS learned FROM (VALUES
  ('Zoe had a', 'Zoe had a pink dress. Zoe wore her pink dress to the party.', 'pink'),
  ('Tom had a', 'Tom had a blue kite. Tom flew his blue kite in the park.', 'blue'),
  ('Lily had a', 'Lily had a red ball. Lily played with the ball in the park.', 'red'),
  ('Ben found a', 'Ben went to the beach with his mom. Ben found a shell at the beach.', 'shell'),
  ('Sue had a', 'Sue had a cat named Max. Max liked the park and the ball.', 'cat'),
  ('Tim had a', 'Tim had a dog. Tim and his dog went to the park with a red ball.', 'dog')) v(q, s, a) \g /dev/null

-- The plain query, the reference.
CREATE FUNCTION pg_temp.related_plain(question text, min_similarity double precision, max_entries integer)
RETURNS TABLE (id bigint, similarity double precision) LANGUAGE sql STABLE AS $$
  WITH q AS (SELECT tsvector_to_array(to_tsvector('english'::regconfig, question)) AS lexemes)
  SELECT k.id, s.similarity FROM q, kvg.knowledge k,
       LATERAL (SELECT cardinality(ARRAY(SELECT unnest(q.lexemes) INTERSECT SELECT unnest(k.lexemes)))::float8
                       / cardinality(q.lexemes) AS similarity) s
  WHERE cardinality(q.lexemes) > 0 AND k.lexemes && q.lexemes AND s.similarity >= min_similarity
  ORDER BY s.similarity DESC, k.id LIMIT max_entries
$$;
CREATE TEMP TABLE probe AS
SELECT q, t, n FROM unnest(ARRAY['Tom flew his kite in the park', 'Zoe and Tom went to the party', 'the park',
                                 'Lily played with the red ball in the park', 'Max the cat', 'a dog and a ball',
                                 'Ben and Sue went to the beach', 'nothing like any story', 'the', '']) q,
                   unnest(ARRAY[0, 0.2, 0.3, 0.5, 0.7, 1.0]) t, unnest(ARRAY[1, 2, 16]) n;
CREATE FUNCTION pg_temp.differing() RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FROM probe WHERE
    (SELECT array_agg(row(id, similarity)::text) FROM kvg.related_knowledge(q, t, n)) IS DISTINCT FROM
    (SELECT array_agg(row(id, similarity)::text) FROM pg_temp.related_plain(q, t, n)) $$;

SELECT is(pg_temp.differing(), 0::bigint, 'the same rows as the plain query without statistics');
ANALYZE kvg.knowledge;
SELECT is(pg_temp.differing(), 0::bigint, 'the same rows as the plain query with statistics');
SELECT cmp_ok((SELECT count(*) FROM kvg.related_knowledge('Tom flew his kite in the park', 0.5, 16)), '>', 0::bigint,
              'a related question finds entries');
SET LOCAL enable_seqscan = off;
SELECT is(pg_temp.differing(), 0::bigint, 'the same rows through the index');

SELECT * FROM finish();
ROLLBACK;
