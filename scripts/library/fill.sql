-- A seeded generator of realistic library entries for the story models
-- (issue #14): short TinyStories-style stories from templates, two questions
-- about each (sentences to complete) with the answer the story verifies.
-- Both questions of a story share its solution, so its KV is stored once
-- (the chain's root link) and each question adds only its own link.
--
--   psql -v stories=500 -v seed=1 -v first=1 -f scripts/library/fill.sql   (scripts/library-scale.sh runs it)
--
-- Stories are numbered: story i (i = first .. first + stories - 1) is the
-- same text for the same seed whatever the batch, so a library grows by
-- filling later numbers. Every character's name is unique (a given name and a
-- family name made of syllables, chosen by i), so every question is too.
-- Learn times land in public.library_learn_times (one row per entry,
-- microseconds), which measure.sql reads.
\set ON_ERROR_STOP on
SET search_path = kvg, public;
SELECT set_config('library.first', :'first', false) IS NULL AS unset,
       set_config('library.stories', :'stories', false) IS NULL AS unset,
       set_config('library.seed', :'seed', false) IS NULL AS unset \gset

CREATE TABLE IF NOT EXISTS public.library_learn_times (story int, question text, micros bigint);

-- The i-th story of a seed: the same text every time.
CREATE OR REPLACE FUNCTION pg_temp.story(i int, seed int,
    OUT name text, OUT story text, OUT colour text, OUT place text, OUT thing text)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  givens text[] := ARRAY['Zoe','Tom','Lily','Ben','Sue','Max','Anna','Tim','Mia','Sam','Lucy','Jack','Emma','Leo',
                         'Kate','Dan','Rose','Finn','Amy','Bob','Ella','Joe','Lola','Ned','Ivy','Gus','Nora','Pip',
                         'Ruby','Ted','Cleo','Hugo','Jade','Kit','Luna','Milo','Nell','Owen','Pam','Rex'];
  syllables text[] := ARRAY['ba','ko','mi','lu','te','ra','no','si','da','fe','gu','ha','jo','ki','lo','me',
                            'pa','ru','so','ti'];
  kinds text[] := ARRAY['girl','boy','little girl','little boy','bunny','puppy','kitten','bear'];
  colours text[] := ARRAY['red','blue','green','pink','yellow','purple','white','brown'];
  things text[] := ARRAY['ball','kite','hat','boat','car','dress','box','cup','bike','book'];
  places text[] := ARRAY['park','beach','lake','garden','school','farm','shop','forest'];
  feelings text[] := ARRAY['happy','glad','proud','excited'];
  -- A fixed mix of i and the seed (no random(): the same story in any batch).
  h bigint := ((i::bigint * 2654435761 + seed::bigint * 40503) % 4294967291);
  pick int;
BEGIN
  -- 40 given names x 20^3 family names: unique up to 320,000 stories.
  name := givens[1 + (i - 1) % 40] || ' ' ||
          initcap(syllables[1 + ((i - 1) / 40) % 20] || syllables[1 + ((i - 1) / 800) % 20] ||
                  syllables[1 + ((i - 1) / 16000) % 20]);
  colour := colours[1 + (h % 8)::int];
  thing := things[1 + ((h / 8) % 10)::int];
  place := places[1 + ((h / 80) % 8)::int];
  pick := ((h / 640) % 8)::int;
  story := 'Once upon a time, there was a ' || kinds[1 + pick] || ' named ' || name || '. ' ||
           name || ' had a ' || colour || ' ' || thing || '. ' ||
           name || ' took the ' || colour || ' ' || thing || ' to the ' || place || '. ' ||
           name || ' was very ' || feelings[1 + ((h / 5120) % 4)::int] || '.';
END $$;

-- The story layout the tiny models can continue (docs/flywheel.md).
SET kvg.knowledge_template = E'{solution}\n{question}';

DO $$
DECLARE
  s record;
  q text;
  a text;
  t0 timestamptz;
  started timestamptz := clock_timestamp();
  first int := current_setting('library.first')::int;
  n int := current_setting('library.stories')::int;
  seed int := current_setting('library.seed')::int;
BEGIN
  FOR i IN first .. first + n - 1 LOOP
    s := pg_temp.story(i, seed);
    FOREACH q IN ARRAY ARRAY[s.name || ' had a', s.name || ' took the ' || s.colour || ' ' || s.thing || ' to the']
    LOOP
      a := CASE WHEN q LIKE '%to the' THEN s.place ELSE s.colour END;
      t0 := clock_timestamp();
      PERFORM kvg_learn(q, 'contains', s.story, a);
      INSERT INTO public.library_learn_times VALUES (i, q, (extract(epoch FROM clock_timestamp() - t0) * 1e6)::bigint);
    END LOOP;
    -- Commit in batches: each one links its audit rows and ends its large objects' locks.
    IF (i - first + 1) % 25 = 0 THEN COMMIT; END IF;
    -- Progress, to watch a long fill (a notice reaches psql as it is raised).
    IF (i - first + 1) % 500 = 0 THEN
      RAISE NOTICE 'story % of %: % entries learned in % s (% ms per entry)', i, first + n - 1,
        2 * (i - first + 1), round(extract(epoch FROM clock_timestamp() - started)),
        round((extract(epoch FROM clock_timestamp() - started) * 1e3 / (2 * (i - first + 1)))::numeric, 1);
    END IF;
  END LOOP;
END $$;
