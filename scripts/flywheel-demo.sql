-- The knowledge flywheel, measured (run by scripts/flywheel-demo.sh in a
-- fresh database with the kvg extension; psql variables: model, template,
-- layout). Twelve facts written as TinyStories-style stories, each asked
--   cold       before anything is learned,
--   solved     by the model from scratch (kvg_solve, 2 attempts, verified
--              against the answer word); what it solves it learns itself,
--   learned    the rest from the story (kvg_learn, with the solve's cost),
--   recurring  the same question again (its artifact grafted), twice, and
--              once more with kvg.prefix_reuse off (everything recomputed:
--              the same bytes, the cost of not grafting),
--   transfer   a related question (the story as context), twice: the first
--              call stores the composition, the second grafts it.
-- An answer is right when its words contain the answer word.
\set ON_ERROR_STOP on
\set QUIET on
SET client_min_messages = warning;
SELECT set_config('kvg.model', :'model', false) \g /dev/null
SELECT set_config('kvg.device', 'cpu', false) \g /dev/null
SELECT set_config('kvg.knowledge_template', :'template', false) \g /dev/null

CREATE TEMP TABLE items (n int, story text, cloze text, cloze_related text, question text, question_related text,
                         answer text);
INSERT INTO items VALUES
 (1, 'Once upon a time, there was a little girl named Lily. Lily had a red ball. Lily loved her red ball. Her red ball was very pretty.',
  'Lily had a', 'Lily loved her', 'What colour was Lily''s ball?', 'What colour was the ball Lily loved?', 'red'),
 (2, 'Once upon a time, there was a little boy named Tom. Tom had a blue kite. Tom loved his blue kite. Every day, Tom flew his blue kite.',
  'Tom had a', 'Every day, Tom flew his', 'What colour was Tom''s kite?', 'What colour was the kite Tom flew every day?', 'blue'),
 (3, 'Once upon a time, there was a cat named Max. Max lived with a girl named Sue. Sue loved Max.',
  'Sue had a cat named', 'The cat that lived with Sue was named', 'What was the name of Sue''s cat?', 'Which cat lived with Sue?', 'Max'),
 (4, 'Once upon a time, there was a boy named Ben. Ben went to the beach. At the beach, Ben found a shell. Ben loved the shell.',
  'Ben went to the', 'Ben found a shell at the', 'Where did Ben go?', 'Where did Ben find the shell?', 'beach'),
 (5, 'Once upon a time, there was a girl named Mia. Mia had a green hat. Mia wore her green hat every day.',
  'Mia wore her', 'Every day, Mia wore her', 'What colour was Mia''s hat?', 'What colour was the hat Mia wore every day?', 'green'),
 (6, 'Once upon a time, there was a dog named Spot. Spot liked to dig in the garden. Spot dug in the garden every day.',
  'Spot dug in the', 'Spot liked to dig in the', 'Where did Spot dig?', 'Where did Spot like to dig every day?', 'garden'),
 (7, 'Once upon a time, there was a girl named Anna. Anna had a yellow duck. Anna loved her yellow duck.',
  'Anna loved her', 'Anna had a', 'What colour was Anna''s duck?', 'What colour was the duck Anna loved?', 'yellow'),
 (8, 'Once upon a time, there was a boy named Sam. Sam had a big truck. Sam played with his truck.',
  'Sam played with his', 'Sam had a big', 'What did Sam play with?', 'What big toy did Sam have?', 'truck'),
 (9, 'Once upon a time, there was a girl named Lucy. Lucy lived by the lake. Lucy liked to swim in the lake.',
  'Lucy liked to swim in the', 'Lucy lived by the', 'Where did Lucy swim?', 'Where did Lucy live?', 'lake'),
 (10, 'Once upon a time, there was a boy named Tim. Tim had a dog named Rex. Tim loved Rex.',
  'Tim had a dog named', 'Tim loved his dog', 'What was the name of Tim''s dog?', 'Which dog did Tim love?', 'Rex'),
 (11, 'Once upon a time, there was a bird named Kiki. Kiki lived in a tree. Kiki sang in the tree.',
  'Kiki sang in the', 'Kiki lived in a', 'Where did Kiki sing?', 'Where did Kiki live?', 'tree'),
 (12, 'Once upon a time, there was a girl named Zoe. Zoe had a pink dress. Zoe wore her pink dress to the party.',
  'Zoe wore her', 'Zoe had a', 'What colour was Zoe''s dress?', 'What colour was the dress Zoe wore to the party?', 'pink');
-- The layout decides which form of each question is asked.
CREATE TEMP VIEW asked AS
SELECT n, story, answer,
       CASE WHEN :'layout' = 'story' THEN cloze ELSE question END AS q,
       CASE WHEN :'layout' = 'story' THEN cloze_related ELSE question_related END AS related
FROM items;

CREATE TEMP TABLE runs (phase text, step int, n int, answer text, mode text, verified boolean, right_answer boolean,
                        grafted int, prefilled int, decoded int, ms float8);
CREATE TEMP TABLE solves (n int, attempts int, solved boolean, solve_tokens bigint, ms float8);

-- One answer per item, in order, recorded under `phase`.
CREATE FUNCTION pg_temp.ask(phase text, related boolean) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  i record;
BEGIN
  FOR i IN SELECT * FROM asked ORDER BY n LOOP
    INSERT INTO runs
    SELECT phase, (SELECT count(*) FROM runs WHERE runs.phase = ask.phase) + 1, i.n, d.answer, d.mode, d.verified,
           kvg.verify('contains', '', d.answer, i.answer), d.tokens_grafted, d.tokens_prefilled, d.tokens_decoded,
           d.graft_ms + d.decode_ms
    FROM kvg_answer_detail(CASE WHEN related THEN i.related ELSE i.q END, 8) d;
  END LOOP;
END
$$;

SELECT pg_temp.ask('1 cold', false) \g /dev/null

DO $$
DECLARE
  i record;
BEGIN
  FOR i IN SELECT * FROM asked ORDER BY n LOOP
    INSERT INTO solves
    SELECT i.n, count(*), bool_or(s.verified), max(s.solve_tokens), sum(s.decode_ms)
    FROM kvg_solve(i.q, 'regex:(?i)\m' || i.answer || '\M', 16, 2) s;
    IF NOT (SELECT solved FROM solves WHERE n = i.n) THEN
      PERFORM kvg_learn(i.q, 'contains', i.story, i.answer, (SELECT solve_tokens FROM solves WHERE n = i.n));
    END IF;
  END LOOP;
END
$$;

SELECT pg_temp.ask('2 recurring (first)', false) \g /dev/null
SELECT pg_temp.ask('3 recurring (again)', false) \g /dev/null
SET kvg.prefix_reuse = off;
SELECT pg_temp.ask('4 recurring, reuse off', false) \g /dev/null
RESET kvg.prefix_reuse;
SELECT pg_temp.ask('5 transfer (first)', true) \g /dev/null
SELECT pg_temp.ask('6 transfer (again)', true) \g /dev/null

\set QUIET off
\echo
\echo '== model' :model
\echo '== template' :layout
SELECT phase, count(*) AS answers, string_agg(DISTINCT mode, ',') AS modes,
       count(*) FILTER (WHERE right_answer) || '/' || count(*) AS right,
       count(*) FILTER (WHERE verified) || '/' || count(verified) AS verified,
       round(avg(grafted), 1) AS grafted, round(avg(prefilled), 1) AS prefilled, round(avg(decoded), 1) AS decoded,
       round(avg(ms)::numeric, 3) AS ms_per_answer
FROM runs GROUP BY phase ORDER BY phase;

SELECT count(*) FILTER (WHERE solved) || '/' || count(*) AS solved_from_scratch,
       round(avg(solve_tokens), 1) AS solve_tokens_per_question, round(avg(ms)::numeric, 3) AS solve_ms_per_question
FROM solves;

-- Recurring vs cold, per answer; and grafting vs recomputing the same prompt.
WITH p AS (
  SELECT phase, avg(decoded) AS decoded, avg(prefilled) AS prefilled, avg(prefilled + decoded) AS computed,
         avg(ms) AS ms
  FROM runs GROUP BY phase
)
SELECT round(r.decoded / c.decoded, 2) AS decode_tokens_recurring_vs_cold,
       round(r.computed / c.computed, 2) AS computed_tokens_recurring_vs_cold,
       round((r.ms / c.ms)::numeric, 2) AS time_recurring_vs_cold,
       round((r.ms / off.ms)::numeric, 2) AS time_graft_vs_recompute,
       round((SELECT avg(solve_tokens) FROM solves) / r.computed, 1) AS solve_tokens_per_recurring_token,
       (SELECT bool_and(a.answer = b.answer) FROM runs a JOIN runs b USING (n)
        WHERE a.phase = '3 recurring (again)' AND b.phase = '4 recurring, reuse off') AS reuse_off_same_bytes
FROM p r, p c, p off
WHERE r.phase = '3 recurring (again)' AND c.phase = '1 cold' AND off.phase = '4 recurring, reuse off';

SELECT n, a.q AS question, a.answer AS expected,
       max(r.answer) FILTER (WHERE phase = '1 cold') AS cold,
       max(r.answer) FILTER (WHERE phase = '3 recurring (again)') AS recurring,
       max(r.answer) FILTER (WHERE phase = '6 transfer (again)') AS transfer
FROM runs r JOIN asked a USING (n) GROUP BY n, a.q, a.answer ORDER BY n;

SELECT * FROM kvg.stats;
SELECT * FROM kvg_audit_verify();
