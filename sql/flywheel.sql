-- The verified-knowledge flywheel (docs/flywheel.md) on the shared
-- 260K-parameter TinyStories model: learning (verified deposits), solving,
-- routing (recurring / transfer / cold), exact automatic prefix reuse,
-- accounting, and manifests that a standalone checker re-verifies.
-- Greedy decoding and the portable recipe make every answer below exact. The
-- model is tiny: most answers are wrong, and `verified` says which are not.
SET search_path = kvg, public;
SET kvg.device = 'cpu';
\getenv data KVG_TEST_DATA
SELECT set_config('kvg.model', :'data' || '/models/stories260K.gguf', false) IS NOT NULL AS model_set;
-- Earlier tests of this database left audit rows and artifacts behind.
SELECT coalesce(max(id), 0) AS audit_start, coalesce(max(seq), 0) AS seq_start FROM audit \gset
CREATE FUNCTION pg_temp.stored() RETURNS text LANGUAGE sql AS $$
  SELECT format('%s entries, %s artifacts, %s large objects, %s audit rows',
                (SELECT count(*) FROM kvg.knowledge), (SELECT count(*) FROM kvg.artifacts),
                (SELECT count(*) FROM pg_largeobject_metadata), (SELECT count(*) FROM kvg.audit))
$$;

-- Question keys: case, spacing and punctuation at the ends do not count.
SELECT normalize_question(E'  What COLOUR was\tLily''s ball?! ') AS normal_form,
       question_key('What colour was Lily''s ball?') = question_key('what colour was  lily''s ball') AS same_key,
       question_key('What colour was Lily''s ball?') = question_key('What colour was Lily''s kite?') AS other_key;

-- Learning checks the entry with its verifier (by default: the solution
-- contains the answer), then stores it with the artifact of its prompt.
SELECT kvg_learn('What colour was Lily''s ball?', 'contains',
                 'Lily had a red ball. She played with her red ball in the park every day.', 'red') AS lily \gset
SELECT question, answer, verifier, evidence, solve_tokens, verified_by = current_user AS by_me,
       a.n_tokens AS question_link_tokens, p.n_tokens AS solution_link_tokens, p.parent_sha256 IS NULL AS root
FROM knowledge k JOIN artifacts a ON a.sha256 = k.artifact_sha256 JOIN artifacts p ON p.sha256 = a.parent_sha256
WHERE k.id = :lily;
SELECT (kvg_artifact_verify(artifact_sha256)).ok AS artifact_verifies FROM knowledge WHERE id = :lily;
-- Learning it again is idempotent: the same id, nothing new stored.
SELECT pg_temp.stored() AS before \gset
SELECT kvg_learn('what colour was Lily''s ball', 'contains', 'Lily had a red ball. She played with her red ball in the park every day.',
                 'red') = :lily AS same_id;
SELECT regexp_replace(pg_temp.stored(), ', \d+ audit rows', '') = regexp_replace(:'before', ', \d+ audit rows', '')
       AS nothing_new_stored;
-- The same question with something else: 23505.
SELECT kvg_learn('What colour was Lily''s ball?', 'contains', 'Lily had a blue ball.', 'blue');
\echo :LAST_ERROR_SQLSTATE

-- Other verifiers: an exact answer, a regular expression, a SQL function.
CREATE SCHEMA regress_verifiers;
-- Atomic SQL (its reach is known: docs/security.md), run as kvg_verifier.
CREATE FUNCTION regress_verifiers.is_a_place(question text, answer text) RETURNS boolean
  LANGUAGE sql RETURN answer IN ('park', 'beach', 'lake', 'garden');
SET search_path = kvg, public, regress_verifiers;
SELECT kvg_learn('Where did Ben find a shell?', 'exact:Beach!',
                 'Ben went to the beach with his mom. At the beach, Ben found a shell.', 'beach', 120) IS NOT NULL AS exact_ok,
       kvg_learn('What colour was Tom''s kite?', 'regex:^(blue|red|green)$',
                 'Tom had a blue kite. Tom flew his blue kite in the wind.', 'blue') IS NOT NULL AS regex_ok,
       kvg_learn('Where did Lucy swim?', 'is_a_place',
                 'Lucy lived by the lake. Lucy liked to swim in the lake.', 'lake') IS NOT NULL AS function_ok;
SELECT question, verifier, evidence, solve_tokens FROM knowledge WHERE id <> :lily ORDER BY id;

-- A refused deposit stores nothing: 22V04 for every kind of verifier.
SELECT pg_temp.stored() AS before \gset
SELECT kvg_learn('Who had a cat?', 'contains', 'Sue had a cat named Max.', 'Tom');
\echo :LAST_ERROR_SQLSTATE
SELECT kvg_learn('Who had a cat?', 'exact:Tom', 'Sue had a cat named Max.', 'Sue');
\echo :LAST_ERROR_SQLSTATE
SELECT kvg_learn('Who had a cat?', 'regex:^T', 'Sue had a cat named Max.', 'Sue');
\echo :LAST_ERROR_SQLSTATE
SELECT kvg_learn('Who had a cat?', 'is_a_place', 'Sue had a cat named Max.', 'Sue');
\echo :LAST_ERROR_SQLSTATE
-- "contains" matches whole words: "red" is not in "Fred".
SELECT kvg_learn('Who had a cat?', 'contains', 'Fred had a cat.', 'red');
\echo :LAST_ERROR_SQLSTATE
SELECT pg_temp.stored() = :'before' AS nothing_stored;

-- Bad input is refused before anything runs.
SELECT kvg_learn('Who had a cat?', 'sometimes', 'Sue had a cat.', 'Sue');
\echo :LAST_ERROR_SQLSTATE
SELECT kvg_learn('Who had a cat?', 'no such verifier!', 'Sue had a cat.', 'Sue');
\echo :LAST_ERROR_SQLSTATE
SELECT kvg_learn('Who had a cat?', 'pg_catalog.textcat', 'Sue had a cat.', 'Sue');
\echo :LAST_ERROR_SQLSTATE
CREATE FUNCTION pg_temp.yes(question text, answer text) RETURNS boolean LANGUAGE sql AS 'SELECT true';
SELECT kvg_learn('Who had a cat?', 'pg_temp.yes', 'Sue had a cat.', 'Sue');
\echo :LAST_ERROR_SQLSTATE
SELECT kvg_learn('Who had a cat?', 'regex:(', 'Sue had a cat.', 'Sue');
\echo :LAST_ERROR_SQLSTATE
SELECT kvg_learn('Who had a cat?', 'exact: ?! ', 'Sue had a cat.', 'Sue');
\echo :LAST_ERROR_SQLSTATE
SELECT kvg_learn(' ?! ', 'contains', 'Sue had a cat.', 'Sue');
\echo :LAST_ERROR_SQLSTATE
SELECT kvg_learn('Who had a cat?', 'contains', '   ', 'Sue');
\echo :LAST_ERROR_SQLSTATE
SELECT kvg_learn(NULL, 'contains', 'Sue had a cat.', 'Sue');
\echo :LAST_ERROR_SQLSTATE
SELECT kvg_learn('Who had a cat?', 'contains', 'Sue had a cat.', 'Sue', -1);
\echo :LAST_ERROR_SQLSTATE
SELECT kvg_answer('Who had a cat?', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT kvg_solve('Who had a cat?', 'contains');
\echo :LAST_ERROR_SQLSTATE
SELECT kvg_solve('Who had a cat?', 'exact:Sue', 8, 0);
\echo :LAST_ERROR_SQLSTATE
SET kvg.knowledge_template = '{question} {solution}';
SHOW kvg.knowledge_template;
SELECT pg_temp.stored() = :'before' AS still_nothing_stored;

-- Recurring: the question's key is in the library. Its artifact is grafted
-- (all but the last prompt token, which is evaluated again for its logits)
-- and only the answer is decoded, then checked with the entry's verifier.
SELECT d.answer, d.mode, d.verified, d.knowledge_id = :lily AS lily,
       d.artifact = k.artifact_sha256 AS grafts_its_artifact, d.tokens_grafted, d.tokens_prefilled,
       d.tokens_decoded <= 8 AS within_budget
FROM kvg_answer_detail('What colour was Lily''s ball?', 8) d, knowledge k WHERE k.id = :lily;
-- Any spelling of the question is the same entry, the same prompt, the same bytes.
SELECT answer AS first_answer FROM kvg_answer_detail('What colour was Lily''s ball?', 8) \gset
SELECT (SELECT answer FROM kvg_answer_detail(' what colour was lily''s   ball ', 8)) = :'first_answer' AS same_answer,
       (SELECT answer FROM kvg_answer_detail('What colour was Lily''s ball?', 8)) = :'first_answer' AS same_again;
-- That answer fails the entry's verifier (verified = f above): the scalar
-- kvg_answer says so, with NULL and a WARNING (DETAIL: which entry, which
-- audit row), or with an error when asked to.
\set VERBOSITY terse
SELECT kvg_answer('What colour was Lily''s ball?', 8) IS NULL AS rejected_is_null;
SET kvg.on_rejected_answer = error;
SELECT kvg_answer('What colour was Lily''s ball?', 8);
\echo :LAST_ERROR_SQLSTATE
RESET kvg.on_rejected_answer;
\set VERBOSITY default
-- A budget of one token decodes one token.
SELECT mode, tokens_decoded FROM kvg_answer_detail('What colour was Lily''s ball?', 1);

-- A template the tiny model can continue: the solution, then a sentence to
-- complete. Then a recurring answer can be right, and verified says so.
SET kvg.knowledge_template = E'{solution}\n{question}';
SELECT kvg_learn('Zoe wore her', 'contains',
                 'Once upon a time, there was a girl named Zoe. Zoe had a pink dress. Zoe wore her pink dress to the party.',
                 'pink') AS zoe \gset
SELECT kvg_learn('Tom had a', 'contains',
                 'Once upon a time, there was a little boy named Tom. Tom had a blue kite. Tom loved his blue kite. '
                 'Every day, Tom flew his blue kite.', 'blue') AS tom \gset
SELECT answer, mode, verified, tokens_grafted, tokens_prefilled, tokens_decoded
FROM kvg_answer_detail('Zoe wore her', 8);
SELECT answer, mode, verified, tokens_grafted, tokens_prefilled, tokens_decoded
FROM kvg_answer_detail('Tom had a', 8);

-- Transfer: a question not in the library, but related to entries in it —
-- they become the context before it. Cold: nothing relevant.
SELECT answer, mode, verified, knowledge_id = :tom AS from_tom, tokens_grafted > 0 AS grafted_solution,
       tokens_prefilled, tokens_decoded
FROM kvg_answer_detail('Every day, Tom flew his', 8);
SELECT answer, mode, verified, knowledge_id, artifact, tokens_grafted, tokens_prefilled, tokens_decoded
FROM kvg_answer_detail('The king sat on his', 8);
-- The composition (Tom's solution, then this question) was stored as a new
-- chain link: the next call grafts the whole prompt.
SELECT answer, mode, tokens_prefilled FROM kvg_answer_detail('Every day, Tom flew his', 8);
-- Two related entries in a row, also stored as links of one chain.
SET kvg.transfer_min_similarity = 0.3;
SELECT mode, answer, tokens_prefilled > 1 AS computed FROM kvg_answer_detail('Zoe and Tom went to the party', 8);
SELECT mode, answer, tokens_prefilled FROM kvg_answer_detail('Zoe and Tom went to the party', 8);
WITH RECURSIVE chain(sha256, parent_sha256, links) AS (
  SELECT sha256, parent_sha256, 1 FROM artifacts
  WHERE sha256 = (SELECT artifact_sha256 FROM audit WHERE operation = 'answer' ORDER BY id DESC LIMIT 1)
  UNION ALL SELECT a.sha256, a.parent_sha256, c.links + 1 FROM artifacts a JOIN chain c ON a.sha256 = c.parent_sha256)
SELECT max(links) AS links_grafted FROM chain;
RESET kvg.transfer_min_similarity;

-- Exact prefix reuse never changes an answer: the same bytes with it off,
-- where everything is computed, in every mode and for kvg_generate.
CREATE TEMP TABLE reuse AS
SELECT q, d.mode, d.answer, d.tokens_grafted
FROM unnest(ARRAY['What colour was Lily''s ball?', 'Zoe wore her', 'Every day, Tom flew his',
                  'Zoe and Tom went to the party', 'The king sat on his']) AS q,
     kvg_answer_detail(q, 12) d;
\set story 'Once upon a time, there was a girl named Zoe. Zoe had a pink dress. Zoe wore her pink dress to the party.\nZoe wore her'
SELECT kvg_generate(:'story', 16) AS story_reused \gset
SELECT artifact_sha256 IS NOT NULL AS generate_grafted, tokens_grafted FROM audit ORDER BY id DESC LIMIT 1;
SET kvg.prefix_reuse = off;
SELECT r.q, r.mode, r.tokens_grafted > 0 AS grafted_with_reuse, d.tokens_grafted AS grafted_without,
       d.answer = r.answer AS same_bytes
FROM reuse r, kvg_answer_detail(r.q, 12) d ORDER BY r.q;
SELECT kvg_generate(:'story', 16) = :'story_reused' AS generate_same_bytes;
RESET kvg.prefix_reuse;

-- Solving: the model answers from scratch (greedy, then sampled), each
-- attempt is checked, the first verified one is learned with its cost.
SELECT attempt, answer, verified, tokens_decoded, solve_tokens, knowledge_id IS NOT NULL AS learned
FROM kvg_solve('Tim had a dog named', 'regex:\mMax\M', 8, 3);
SELECT question, solution, answer, verifier, solve_tokens, evidence FROM knowledge WHERE question = 'Tim had a dog named';
SELECT attempt, answer, verified, solve_tokens, knowledge_id FROM kvg_solve('Sue had a cat named', 'exact:Max', 8, 3);
SELECT count(*) AS unsolved_learned FROM knowledge WHERE question = 'Sue had a cat named';
-- Asked again, solved and learned questions are recurring, and the accounting
-- sets their answers against what solving cost. Ben's entry was learned under
-- the other template: its prompt is computed once more and stored as a chain.
-- (Its answer ends with its line: 2 tokens decoded of the 8 allowed.)
SELECT q, d.answer, d.mode, d.verified, d.tokens_prefilled, d.tokens_decoded,
       (SELECT solve_tokens FROM knowledge k WHERE k.id = d.knowledge_id)
FROM unnest(ARRAY['Tim had a dog named', 'Where did Ben find a shell?', 'Where did Ben find a shell?'])
       WITH ORDINALITY AS u(q, n),
     kvg_answer_detail(q, 8) d
ORDER BY n;

-- In a new session, recurring answers are the same bytes.
\c
SET search_path = kvg, public;
SET kvg.device = 'cpu';
SELECT set_config('kvg.model', :'data' || '/models/stories260K.gguf', false) IS NOT NULL AS model_set;
SELECT answer = :'first_answer' AS same_in_new_session FROM kvg_answer_detail('What colour was Lily''s ball?', 8);


-- Accounting: answers by mode, and what grafting cost and avoided. (Times vary;
-- tokens do not. No figure is negative.)
SELECT mode, answers, verified, tokens_grafted, tokens_prefilled, tokens_decoded, solve_tokens_saved,
       ms_per_answer > 0 AS timed, graft_ms >= 0 AND recompute_ms >= 0 AS times_not_negative
FROM stats;

-- Every call wrote its audit row, and the chain verifies.
SELECT operation, mode, count(*), count(output_text) AS with_output, count(artifact_sha256) AS with_artifact,
       count(*) FILTER (WHERE verified) AS verified
FROM audit WHERE id > :audit_start GROUP BY operation, mode ORDER BY operation, mode;
SELECT count(*) AS output_hashes_wrong FROM audit
WHERE id > :audit_start AND output_sha256 IS DISTINCT FROM encode(sha256(convert_to(output_text, 'UTF8')), 'hex')
  AND output_text IS NOT NULL;
SELECT * FROM kvg_audit_verify();

-- Manifests: scripts/kvg-manifest-check.py re-hashes every row and output
-- without the database, re-scores the answers against an answer key, and
-- refuses a manifest with one byte changed.
SELECT '/tmp/kvg-regress-' || pg_backend_pid() AS tmp \gset
\setenv KVG_TMP :tmp
\pset tuples_only on
\pset format unaligned
\o :tmp.manifest.json
SELECT kvg_manifest(:seq_start + 1);
\o :tmp.manifest.jsonl
SELECT kvg_manifest_lines(:seq_start + 1);
\o :tmp.tampered.jsonl
SELECT CASE WHEN n = 3 THEN replace(l, '"tokens_in": ', '"tokens_in": 1') ELSE l END
FROM kvg_manifest_lines(:seq_start + 1) WITH ORDINALITY AS m(l, n);
\o :tmp.key.json
SELECT jsonb_object_agg(question, answer) FROM knowledge;
-- One byte of one answer text changed (a valid manifest otherwise).
\o :tmp.tampered.json
SELECT overlay(m PLACING CASE substr(m, p, 1) WHEN 'a' THEN 'b' ELSE 'a' END FROM p FOR 1)
FROM (SELECT m, regexp_instr(m, '[a-z]', strpos(m, '"output_text": "') + 16) AS p
      FROM (SELECT kvg_manifest(:seq_start + 1)::text AS m) s) t;
\o
\pset format aligned
\pset tuples_only off
\! python3 scripts/kvg-manifest-check.py "$KVG_TMP.manifest.json" --answers "$KVG_TMP.key.json" >"$KVG_TMP.out"; s=$?; sed -E 's/seq [0-9]+: head [0-9a-f]{64}/seq N: head H/' "$KVG_TMP.out"; echo "exit status $s"
\! python3 scripts/kvg-manifest-check.py "$KVG_TMP.tampered.json" 2>&1 | sed -E 's/audit row [0-9]+/audit row N/'
\! python3 scripts/kvg-manifest-check.py "$KVG_TMP.tampered.json" >/dev/null 2>&1; echo "exit status $?"
-- The same rows as JSON Lines (kvg_manifest_lines), checked one line at a
-- time: the same verdict, and one changed field in the second row is caught.
\! python3 scripts/kvg-manifest-check.py "$KVG_TMP.manifest.jsonl" --answers "$KVG_TMP.key.json" | cmp - "$KVG_TMP.out" && echo "JSON Lines: the same verdict"
\! python3 scripts/kvg-manifest-check.py "$KVG_TMP.tampered.jsonl" 2>&1 | sed -E 's/audit row [0-9]+/audit row N/'
\! rm -f "$KVG_TMP".*.json "$KVG_TMP".*.jsonl "$KVG_TMP".out
SELECT jsonb_array_length(m->'entries') = (SELECT count(*) FROM audit WHERE id > :audit_start) AS every_row,
       m->'entries'->0->>'row_encoding' AS encoding
FROM kvg_manifest(:seq_start + 1) AS m;
SELECT jsonb_array_length(kvg_manifest(:seq_start + 1, :seq_start + 3)->'entries') AS bounded;
-- Cancellation (statement_timeout) stops an answer with the usual error.
-- Last: a call completed before the timeout keeps its audit row (its caller
-- rolled back: docs/audit-chain.md), and how many complete varies.
-- (Where it stops varies, so the error's context is not shown.)
SET statement_timeout = '50ms';
\set SHOW_CONTEXT never
SELECT count((SELECT answer FROM kvg_answer_detail('What colour was Lily''s ball?', 256 + 0 * g)))
FROM generate_series(1, 10000) g;
\set SHOW_CONTEXT errors
RESET statement_timeout;
DROP SCHEMA regress_verifiers CASCADE;
