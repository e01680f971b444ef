-- The engine functions, on the shared 260K-parameter TinyStories model.
-- Greedy decoding and the portable recipe make every output below exact.
-- (On the CPU here, so that the output is the same with or without a GPU;
-- tests/pgtap/05_engine.sql compares the devices.)
SET search_path = kvg, public;
SET kvg.device = 'cpu';
-- Explicit artifacts only: automatic prefix reuse would graft the captures
-- below into the "recompute" side of every comparison (flywheel.sql tests it).
SET kvg.prefix_reuse = off;
\getenv data KVG_TEST_DATA
\getenv fixtures KVG_FIXTURES

-- No model yet: 22023. A path that does not exist: 42704.
SELECT kvg_model_info();
\echo :LAST_ERROR_SQLSTATE
SET kvg.model = '/nonexistent/model.gguf';
SELECT kvg_generate('Once upon a time', 8);
\echo :LAST_ERROR_SQLSTATE
SELECT set_config('kvg.model', :'data' || '/models/stories260K.gguf', false) IS NOT NULL AS model_set;

SELECT info->>'architecture' AS architecture, info->>'fingerprint' AS fingerprint, info->'n_layer' AS n_layer,
       info->'n_vocab' AS n_vocab, info->>'recipe' AS recipe, info->>'device' AS device,
       -- kvg.threads 0, the default, is kvg.max_threads (the cores: machine-dependent).
       (info->>'threads')::int = current_setting('kvg.max_threads')::int AS threads_is_max_threads
FROM kvg_model_info() AS info;

-- Greedy generation with one thread, and the same again with two.
SET kvg.threads = 1;
SELECT kvg_generate('Once upon a time', 24) AS story;
SET kvg.threads = 2;
SELECT kvg_generate('Once upon a time', 24) AS story;
RESET kvg.threads;
-- Seeded sampling is reproducible.
SELECT kvg_generate('Once upon a time', 16, seed => 7, temperature => 0.9)
     = kvg_generate('Once upon a time', 16, seed => 7, temperature => 0.9) AS same_sample;

-- Capture a prefix, then a continuation of it (a chain of two artifacts).
SELECT kvg_capture('Once upon a time, there was a little girl') AS a \gset
SELECT kvg_capture(' named Lily.', :'a') AS b \gset
SELECT n_tokens, recipe, parent_sha256 = :'a' AS continues_a,
       model_fingerprint = kvg_model_info()->>'fingerprint' AS same_model,
       (kvg_artifact_verify(sha256)).ok AS verifies
FROM artifacts WHERE sha256 IN (:'a', :'b') ORDER BY n_tokens DESC;
-- Capturing the same text again stores nothing new.
SELECT kvg_capture('Once upon a time, there was a little girl') = :'a' AS same_artifact;
SELECT count(*) AS artifacts FROM artifacts WHERE model_fingerprint = kvg_model_info()->>'fingerprint';

-- Generating after a graft gives exactly what the whole prompt gives.
SELECT kvg_generate(' named', 24, :'a') AS grafted,
       kvg_generate(' named', 24, :'a') = kvg_generate('Once upon a time, there was a little girl named', 24)
         AS same_as_recompute;
SELECT kvg_generate(' She', 24, :'b')
     = kvg_generate('Once upon a time, there was a little girl named Lily. She', 24) AS chain_same_as_recompute;

-- The graft check compares every logit of the continuation.
SELECT graft_logits_sha256 = recompute_logits_sha256 AS same_logits, kl_max, argmax_agreement, exact
FROM kvg_graft_check(:'a', ' named Lily. She liked to', 2);
SELECT exact FROM kvg_graft_check(:'b', ' She liked to play', 0);

-- Refusals.
SELECT kvg_generate('x', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT kvg_generate('x', 257);
\echo :LAST_ERROR_SQLSTATE
SELECT kvg_generate('x', 4, temperature => -1);
\echo :LAST_ERROR_SQLSTATE
-- NULL or blank input gives NULL, or no row, never an error (docs/sql.md).
SELECT kvg_generate(NULL, 4) IS NULL AS null_prompt_gives_null;
SELECT kvg_generate('x', 4, repeat('ab', 32));
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS rows_for_a_blank_continuation FROM kvg_graft_check(:'a', '');
-- An artifact of another model (the test fixture's) is refused: 22V01.
SELECT kvg_import(pg_read_binary_file(:'fixtures' || '/root.kvga'), verify => false) AS other \gset
\set VERBOSITY sqlstate
SELECT kvg_generate(' and', 4, :'other');
\set VERBOSITY default


-- One audit row per call that did its work, and the chain verifies.
SELECT operation, count(*), count(artifact_sha256) AS with_artifact, count(output_sha256) AS with_output,
       count(logits_sha256) AS with_logits
FROM audit WHERE operation IN ('capture', 'generate', 'graft_check') GROUP BY operation ORDER BY operation;
SELECT output_sha256 = encode(sha256(convert_to(kvg_generate('Once upon a time', 24), 'UTF8')), 'hex')
         AS output_hash_recorded
FROM audit WHERE operation = 'generate' ORDER BY id LIMIT 1;
SELECT * FROM kvg_audit_verify();
-- Cancellation (here statement_timeout) stops generation with the usual error.
-- Last: a call completed before the timeout keeps its audit row (its caller
-- rolled back: docs/audit-chain.md), and how many complete varies.
SET statement_timeout = '50ms';
-- (Where it stops varies, so the error's context is not shown.)
\set SHOW_CONTEXT never
SELECT count(kvg_generate('Once upon a time', 256)) FROM generate_series(1, 10000);
\set SHOW_CONTEXT errors
RESET statement_timeout;
