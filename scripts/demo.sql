-- The main demo: capture verified knowledge once, prove the graft exact,
-- generate from the graft and measure the time it saves, and check the
-- audit trail. Run by scripts/demo.sh, in a database it has just created,
-- with the psql variables `model` (a GGUF path the server can read) and
-- `manifest` (where to write the manifest).
\set ON_ERROR_STOP on
\pset footer off
SET client_min_messages = warning;
CREATE EXTENSION kvg;
-- Generation stops after a number of tokens, which may end inside a word:
-- the demo generates a few tokens more than it shows and cuts at the last
-- whitespace, so that what is printed ends on a word boundary.
CREATE FUNCTION pg_temp.whole_words(t text) RETURNS text LANGUAGE sql IMMUTABLE
  AS $$ SELECT CASE WHEN t ~ '\s\S' THEN regexp_replace(t, '\s+\S*$', '') ELSE t END $$;
SELECT set_config('kvg.model', :'model', false) IS NOT NULL AS model_configured \gset
SET kvg.threads = 2;

\echo
\echo == The model (kvg_model_info)
SELECT info->>'architecture' AS architecture, info->>'n_layer' AS layers, info->>'parameters' AS parameters,
       info->>'recipe' AS recipe, left(info->>'fingerprint', 16) || '…' AS fingerprint
FROM kvg_model_info() AS info;

\echo
\echo == Capture: prefill the knowledge once and store its KV as a large object keyed by SHA-256
-- A long piece of "verified knowledge": a story told several times, so that
-- the prefix is long enough for the time saved to show; 24 times, or as many
-- as fit in the model's context with room for a question and 32 generated
-- tokens (a capture that does not fit is rolled back with its large object).
CREATE TEMP TABLE knowledge (story text, artifact text);
DO $$
DECLARE
  n_ctx int := (kvg_model_info()->>'n_ctx')::int;
  times int := 24;
  story text;
  sha text;
BEGIN
  LOOP
    SELECT string_agg(format('Once upon a time, there was a little girl named Lily. She had a red ball and a '
                             'small dog named Max. Every day they played in the park near the big tree. (%s)', i), ' ')
      INTO story FROM generate_series(1, times) AS i;
    BEGIN
      sha := kvg_capture(story);
      IF (SELECT n_tokens FROM kvg.artifacts WHERE sha256 = sha) + 64 > n_ctx THEN
        RAISE EXCEPTION 'no room after the knowledge' USING ERRCODE = 'program_limit_exceeded';
      END IF;
      INSERT INTO knowledge VALUES (story, sha);
      RETURN;
    EXCEPTION WHEN program_limit_exceeded THEN
      IF times = 1 THEN
        RAISE;
      END IF;
      times := times / 2;
    END;
  END LOOP;
END
$$;
SELECT story AS knowledge, artifact FROM knowledge \gset
SELECT left(sha256, 16) || '…' AS artifact, n_tokens, bytes, recipe FROM kvg.artifacts WHERE sha256 = :'artifact';

\echo
\echo == Proof: graft + continuation against one monolithic recompute of the whole prompt
SELECT left(graft_logits_sha256, 16) || '…' AS graft_logits, left(recompute_logits_sha256, 16) || '…' AS recompute_logits,
       kl_max, argmax_agreement, exact
FROM kvg_graft_check(:'artifact', ' One day, Lily and Max went to the park.', 5);

\echo
\echo == Generate: cold (prefill everything) versus grafted (prefill only the question)
CREATE TEMP TABLE runs (mode text, output text, ms float8);
SELECT set_config('demo.knowledge', :'knowledge', false), set_config('demo.artifact', :'artifact', false) \g /dev/null
DO $$
DECLARE
  knowledge text := current_setting('demo.knowledge');
  artifact text := current_setting('demo.artifact');
  started timestamptz;
  out text;
BEGIN
  -- Automatic prefix reuse would graft the stored knowledge here too: off,
  -- so that this run really recomputes everything.
  PERFORM set_config('kvg.prefix_reuse', 'off', true);
  started := clock_timestamp();
  out := kvg_generate(knowledge || ' One day, Lily', 32);
  PERFORM set_config('kvg.prefix_reuse', 'on', true);
  INSERT INTO runs VALUES ('cold', out, extract(epoch FROM clock_timestamp() - started) * 1000);
  started := clock_timestamp();
  out := kvg_generate(' One day, Lily', 32, artifact => artifact);
  INSERT INTO runs VALUES ('grafted', out, extract(epoch FROM clock_timestamp() - started) * 1000);
END
$$;
SELECT mode, round(ms::numeric, 1) AS ms, pg_temp.whole_words(output) AS output FROM runs;
SELECT (SELECT output FROM runs WHERE mode = 'cold') = (SELECT output FROM runs WHERE mode = 'grafted')
         AS identical_output,
       round(((SELECT ms FROM runs WHERE mode = 'cold') / (SELECT ms FROM runs WHERE mode = 'grafted'))::numeric, 1)
         AS speedup;

\echo
\echo == Answer: learn a verified fact once, then answer its question by graft (recurring), a related one by transfer
SET kvg.knowledge_template = E'{solution}\n{question}';
SELECT kvg_learn('Zoe wore her', 'contains',
                 'Once upon a time, there was a girl named Zoe. Zoe had a pink dress. Zoe wore her pink dress to the party.',
                 'pink') AS knowledge_id;
-- An answer is one line; one that ran out of tokens is cut to whole words.
SELECT question, CASE WHEN a.tokens_decoded < 12 THEN a.answer ELSE pg_temp.whole_words(a.answer) END AS answer,
       a.mode, a.verified, a.tokens_grafted AS grafted, a.tokens_prefilled AS prefilled, a.tokens_decoded AS decoded
FROM unnest(ARRAY['Zoe wore her', 'Zoe had a', 'The sky above the old mill was']) WITH ORDINALITY AS q(question, n),
     LATERAL kvg_answer_detail(q.question, 12) AS a
ORDER BY q.n;
\echo verified: true or false when a recurring answer was checked by its stored verifier (here: does it contain the word pink);
\echo NULL for transfer and cold answers, which no stored verifier covers (unchecked, not wrong).
SELECT * FROM kvg.stats;

\echo
\echo == Audit: one hash-chained row per engine call, committed by the audit writer (a background worker) before the call returns
SELECT seq, operation, left(input_sha256, 12) || '…' AS input, left(coalesce(artifact_sha256, '-'), 12) AS artifact,
       left(output_sha256, 12) || '…' AS output, tokens_in, tokens_out, kv_proven
FROM kvg.audit ORDER BY seq;
SELECT (kvg_audit_verify()).ok AS audit_chain_verifies, (kvg_artifact_verify(:'artifact')).ok AS artifact_verifies;

-- A manifest a third party can re-check without the engine or the database.
\pset tuples_only on
\pset format unaligned
\o :manifest
SELECT kvg_manifest();
\o
\pset tuples_only off
\pset format aligned
