-- The objects CREATE EXTENSION kvg makes, and the constraints on them.
BEGIN;
SELECT plan(45);

SELECT has_schema('kvg');
SELECT is((SELECT extrelocatable FROM pg_extension WHERE extname = 'kvg'), false, 'kvg is not relocatable');
SELECT is((SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'kvg'), 'kvg',
          'kvg lives in schema kvg');
SELECT has_role('kvg_user');

SELECT columns_are('kvg', 'artifacts', ARRAY['sha256', 'loid', 'bytes', 'n_tokens', 'model_fingerprint',
                                              'recipe', 'parent_sha256', 'tokens_sha256', 'created_at',
                                              'created_by', 'provenance']);
SELECT col_is_pk('kvg', 'artifacts', 'sha256', 'artifacts are keyed by sha256');
SELECT col_type_is('kvg', 'artifacts', 'loid', 'oid', 'loid is an oid');
SELECT col_not_null('kvg', 'artifacts', 'loid', 'loid is not null');
SELECT col_is_unique('kvg', 'artifacts', 'loid', 'one row per large object');
SELECT col_type_is('kvg', 'artifacts', 'created_by', 'name', 'created_by is a name');
SELECT fk_ok('kvg', 'artifacts', 'parent_sha256', 'kvg', 'artifacts', 'sha256', 'a parent is a stored artifact');
SELECT throws_ok($$INSERT INTO kvg.artifacts (sha256, loid) VALUES ('abc', 1)$$, '23514', NULL,
                 'sha256 must be 64 characters');
SELECT throws_ok($$INSERT INTO kvg.artifacts (sha256, loid) VALUES (repeat('AB', 32), 1)$$, '23514', NULL,
                 'sha256 must be lowercase hex');

SELECT columns_are('kvg', 'audit', ARRAY['id', 'at', 'role', 'operation', 'model_fingerprint', 'recipe',
                                          'input_sha256', 'artifact_sha256', 'output_sha256', 'logits_sha256',
                                          'tokens_in', 'tokens_out', 'tokens_grafted', 'mode', 'knowledge_id',
                                          'verified', 'output_text', 'graft_us', 'prefill_us', 'decode_us',
                                          'prev_hash', 'row_hash', 'seq', 'kv_proven', 'row_encoding',
                                          'output_bytes', 'caller_xid', 'session_role', 'temperature', 'top_p',
                                          'seed', 'max_tokens', 'stop_reason', 'prompt_tokens_sha256',
                                          'template_sha256', 'artifact_chain']);
SELECT col_is_pk('kvg', 'audit', 'id', 'audit rows are keyed by id');
SELECT col_type_is('kvg', 'audit', 'id', 'bigint', 'id is a bigint');
SELECT col_default_is('kvg', 'audit', 'id', $$nextval('kvg.audit_id_seq'::regclass)$$, 'id is a bigserial');
SELECT col_type_is('kvg', 'audit', 'at', 'timestamp with time zone', 'at is a timestamptz');
SELECT has_table('kvg', 'audit_head', 'the chain head exists');
SELECT has_index('kvg', 'artifacts', 'artifacts_parent_sha256_tokens_sha256_idx', ARRAY['parent_sha256', 'tokens_sha256'],
                 'chain links are indexed by (parent, own tokens) for prefix reuse');
SELECT throws_ok($$SELECT kvg.audit_insert('x', 'postgres', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, mode => 'warm')$$,
                 '23514', NULL, 'an audit row''s mode is recurring, transfer or cold');

-- The knowledge library (docs/flywheel.md).
SELECT columns_are('kvg', 'knowledge', ARRAY['id', 'question', 'question_key', 'solution', 'answer', 'verifier',
                                              'evidence', 'verified_at', 'verified_by', 'artifact_sha256',
                                              'solve_tokens', 'lexemes', 'verifier_pin', 'verifier_frozen']);
SELECT col_is_unique('kvg', 'knowledge', 'question_key', 'one entry per normalized question');
-- Constraint triggers rather than a foreign key (docs/audit-chain.md, "Artifacts").
SELECT trigger_is('kvg', 'knowledge', 'knowledge_artifact_stored', 'kvg', 'knowledge_artifact_check',
                  'an entry''s artifact is stored');
SELECT has_trigger('kvg', 'knowledge', 'knowledge_immutable', 'entries are not edited');
SELECT has_view('kvg', 'stats', 'the accounting view exists');
SELECT is(kvg.normalize_question(E'  What COLOUR\twas   Lily''s ball?!  '), 'what colour was lily''s ball',
          'normalization: ASCII lower case, whitespace collapsed, trimmed, punctuation at the ends removed');
SELECT is(kvg.question_key('What colour was Lily''s ball?'),
          encode(sha256(convert_to('what colour was lily''s ball', 'UTF8')), 'hex'),
          'the question key is the SHA-256 of the normal form');
SELECT is(kvg.normalize_question('Ça va? ÉTÉ.'), 'Ça va? ÉtÉ', 'only ASCII is folded: the key does not depend on the locale');
SELECT has_function('public', 'kvg_learn', ARRAY['text', 'text', 'text', 'text', 'bigint']);
SELECT function_returns('public', 'kvg_learn', ARRAY['text', 'text', 'text', 'text', 'bigint'], 'bigint');
SELECT function_returns('public', 'kvg_answer', ARRAY['text', 'integer'], 'text');
SELECT function_returns('public', 'kvg_manifest', ARRAY['bigint', 'bigint'], 'jsonb');
SELECT function_returns('public', 'kvg_manifest_lines', ARRAY['bigint', 'bigint'], 'setof text');

SELECT has_function('public', 'kvg_import', ARRAY['bytea', 'boolean']);
SELECT function_returns('public', 'kvg_import', ARRAY['bytea', 'boolean'], 'text');
SELECT has_function('public', 'kvg_export', ARRAY['text']);
SELECT function_returns('public', 'kvg_export', ARRAY['text'], 'bytea');
SELECT has_function('public', 'kvg_artifact_verify', ARRAY['text']);
SELECT function_returns('public', 'kvg_artifact_verify', ARRAY['text'], 'record');
SELECT has_function('public', 'kvg_audit_verify', ARRAY['bigint', 'text']);
SELECT function_returns('public', 'kvg_audit_verify', ARRAY['bigint', 'text'], 'record');

SELECT has_trigger('kvg', 'audit', 'audit_append_only', 'kvg.audit is append-only');
SELECT has_trigger('kvg', 'artifacts', 'artifacts_immutable', 'artifact rows are immutable');
SELECT has_trigger('kvg', 'artifacts', 'artifacts_unlink', 'a deleted artifact takes its large object along');

SELECT * FROM finish();
ROLLBACK;
