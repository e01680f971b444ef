-- Nothing for PUBLIC; kvg_user may call the functions and read the catalogs
-- but write nothing directly; the large objects belong to the schema owner.
BEGIN;
SELECT plan(35);
\ir fixtures.psql
GRANT SELECT ON fixture TO kvg_user;

SELECT ok(NOT has_schema_privilege('public', 'kvg', 'USAGE'), 'PUBLIC cannot use schema kvg');
SELECT ok(NOT bool_or(has_function_privilege('public', p.oid, 'EXECUTE')),
          'PUBLIC can execute no kvg function (in schema kvg or public)')
FROM pg_proc p
JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'kvg');
SELECT is(array_agg(DISTINCT p.proname::text ORDER BY p.proname::text),
          ARRAY['kvg_answer', 'kvg_answer_detail', 'kvg_answers', 'kvg_artifact_delete', 'kvg_artifact_verify', 'kvg_audit_verify', 'kvg_audit_writers', 'kvg_capture',
                'kvg_chat', 'kvg_chat_prompt', 'kvg_engine_worker', 'kvg_engine_worker_reset', 'kvg_export', 'kvg_generate', 'kvg_generate_bytes', 'kvg_generate_positional',
                'kvg_graft_check', 'kvg_import', 'kvg_learn',
                'kvg_manifest', 'kvg_manifest_lines', 'kvg_model_info', 'kvg_orphans', 'kvg_progress', 'kvg_solve', 'kvg_tokenize', 'kvg_vacuum'],
          'the kvg_* API is in schema public: callable unqualified right after CREATE EXTENSION')
FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace AND p.proname LIKE 'kvg\_%';
SELECT ok(bool_and(has_function_privilege('kvg_user', f, 'EXECUTE')), 'kvg_user can execute the SQL API')
FROM unnest(ARRAY['public.kvg_import(bytea, boolean)', 'public.kvg_export(text)', 'public.kvg_artifact_verify(text)',
                  'public.kvg_audit_verify(bigint, text)', 'public.kvg_learn(text, text, text, text, bigint)',
                  'public.kvg_solve(text, text, integer, integer)', 'public.kvg_answer(text, integer)',
                  'public.kvg_answer_detail(text, integer)',
                  'public.kvg_generate_bytes(text, integer, text, bigint, double precision)',
                  'public.kvg_generate_positional(text[], text, integer)', 'public.kvg_tokenize(text, text)',
                  'public.kvg_generate(integer[], integer, text, bigint, double precision)',
                  'public.kvg_capture(integer[], text)', 'public.kvg_graft_check(text, integer[], integer)']) AS f;
SELECT ok(NOT has_function_privilege('kvg_user', 'public.kvg_orphans()', 'EXECUTE')
          AND NOT has_function_privilege('kvg_user', 'public.kvg_vacuum()', 'EXECUTE')
          AND NOT has_function_privilege('kvg_user', 'public.kvg_artifact_delete(text, boolean)', 'EXECUTE'),
          'kvg_user cannot list or remove orphaned large objects, nor delete artifacts (the owner''s job)');
SELECT ok(NOT has_function_privilege('kvg_user', 'public.kvg_manifest(bigint, bigint)', 'EXECUTE')
          AND NOT has_function_privilege('kvg_user', 'public.kvg_manifest_lines(bigint, bigint)', 'EXECUTE'),
          'kvg_user cannot produce manifests (they hold every role''s rows)');
SELECT ok(has_function_privilege('kvg_auditor', 'public.kvg_manifest(bigint, bigint)', 'EXECUTE')
          AND has_table_privilege('kvg_auditor', 'kvg.audit', 'SELECT'), 'kvg_auditor reads the audit and produces manifests');
SELECT ok(NOT has_table_privilege('kvg_user', 'kvg.audit_head', 'INSERT, UPDATE, DELETE'),
          'kvg_user cannot move the chain''s head');
SELECT ok(NOT has_function_privilege('kvg_user', 'kvg.audit_insert(text, name, text, text, text, text, text, text, integer, integer, integer, text, bigint, boolean, text, bigint, bigint, bigint, boolean, bytea, xid8, name, double precision, double precision, bigint, integer, text, text, text, text, text)', 'EXECUTE'),
          'kvg_user cannot append audit rows itself');
SELECT ok(has_table_privilege('kvg_user', 'kvg.knowledge', 'SELECT') AND has_table_privilege('kvg_user', 'kvg.stats', 'SELECT'),
          'kvg_user reads the library and its accounting');
SELECT ok(NOT has_table_privilege('kvg_user', 'kvg.knowledge', 'INSERT, UPDATE, DELETE, TRUNCATE'),
          'kvg_user cannot write kvg.knowledge: only kvg_learn and kvg_solve deposit');
SELECT ok(has_table_privilege('kvg_user', 'kvg.readable_artifacts', 'SELECT')
          AND NOT has_table_privilege('kvg_user', 'kvg.artifacts', 'SELECT')
          AND NOT has_table_privilege('kvg_user', 'kvg.artifact_claims', 'SELECT')
          AND NOT has_table_privilege('kvg_user', 'kvg.storage_charges', 'SELECT')
          AND NOT has_table_privilege('kvg_user', 'kvg.audit_head', 'SELECT'),
          'kvg_user reads artifacts through kvg.readable_artifacts, none of the tables of every user''s rows, '
          'nor the chain''s head');
SELECT ok(has_table_privilege('kvg_user', 'kvg.readable_audit', 'SELECT')
          AND NOT has_table_privilege('kvg_user', 'kvg.audit', 'SELECT'),
          'kvg_user reads its audit rows through kvg.readable_audit, not the table');
SELECT ok(NOT has_table_privilege('kvg_user', 'kvg.artifacts', 'INSERT, UPDATE, DELETE, TRUNCATE'),
          'kvg_user cannot write kvg.artifacts');
SELECT ok(NOT has_table_privilege('kvg_user', 'kvg.audit', 'INSERT, UPDATE, DELETE, TRUNCATE'),
          'kvg_user cannot write kvg.audit');
SELECT is(count(*), 0::bigint, 'no SECURITY DEFINER function')
FROM pg_proc WHERE pronamespace = 'kvg'::regnamespace AND prosecdef;
-- An SQL-standard body (RETURN, BEGIN ATOMIC) is parsed when it is created:
-- no search_path reaches it later.
SELECT is(count(*), 0::bigint, 'every SQL/PLpgSQL function pins search_path or has an SQL-standard body')
FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
WHERE p.pronamespace = 'kvg'::regnamespace AND l.lanname <> 'c' AND p.prosqlbody IS NULL
  AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false);

CREATE ROLE tap_alice IN ROLE kvg_user;
CREATE ROLE tap_nobody;

SET ROLE tap_alice;
SELECT is(public.kvg_import(pg_temp.fixture('root'), verify => false), pg_temp.fixture_sha('root'), 'kvg_user imports');
SELECT is((public.kvg_artifact_verify(pg_temp.fixture_sha('root'))).ok, true, 'kvg_user verifies');
SELECT is(public.kvg_export(pg_temp.fixture_sha('root')), pg_temp.fixture('root'), 'kvg_user exports');
SELECT is((public.kvg_audit_verify()).ok, true, 'kvg_user verifies the audit chain');
SELECT throws_ok($$INSERT INTO kvg.audit (at, role, operation, prev_hash, row_hash)
                   VALUES (now(), 'tap_alice', 'forged', 'x', 'y')$$, '42501', NULL,
                 'kvg_user cannot forge an audit row');
SELECT throws_ok($$SELECT kvg.audit_insert('forged', 'tap_alice', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)$$,
                 '42501', NULL, 'kvg_user cannot call the audit insert path');
SELECT throws_ok($$INSERT INTO kvg.artifacts (sha256, loid) VALUES (repeat('0', 64), 1)$$, '42501', NULL,
                 'kvg_user cannot forge an artifact row');
SELECT throws_ok(format('SELECT lo_unlink(%s)', (SELECT loid FROM kvg.readable_artifacts WHERE sha256 = pg_temp.fixture_sha('root'))),
                 '42501', NULL, 'kvg_user cannot unlink an artifact''s large object');
SELECT throws_ok(format('SELECT lo_put(%s, 0, ''\x00'')', (SELECT loid FROM kvg.readable_artifacts WHERE sha256 = pg_temp.fixture_sha('root'))),
                 '42501', NULL, 'kvg_user cannot overwrite an artifact''s large object');
-- kvg's own statements do not depend on the caller's search_path.
SET search_path = '';
SELECT public.kvg_import(pg_temp.fixture('child'), verify => false) AS child_sha \gset
RESET search_path;
SELECT is(:'child_sha', pg_temp.fixture_sha('child'), 'import works with an empty search_path');
RESET ROLE;

SELECT is(created_by, 'tap_alice'::name, 'created_by is the calling role')
FROM kvg.artifacts WHERE sha256 = pg_temp.fixture_sha('root');
SELECT is(m.lomowner, n.nspowner, 'the large object belongs to the schema owner, not the caller')
FROM kvg.artifacts a JOIN pg_largeobject_metadata m ON m.oid = a.loid, pg_namespace n
WHERE a.sha256 = pg_temp.fixture_sha('root') AND n.nspname = 'kvg';
SELECT is(string_agg(role || ':' || operation, ',' ORDER BY id), 'tap_alice:export,tap_alice:import',
          'the audit rows name the calling role (an export is audited too)')
FROM (SELECT id, role, operation FROM kvg.audit ORDER BY id DESC LIMIT 2) AS last_two;

SET ROLE tap_nobody;
SELECT throws_ok($$SELECT public.kvg_audit_verify()$$, '42501', NULL, 'a role outside kvg_user cannot use kvg');
SELECT throws_ok($$SELECT count(*) FROM kvg.artifacts$$, '42501', NULL, 'a role outside kvg_user cannot read the catalog');
SELECT throws_ok($$SELECT public.kvg_answer('Who had a red ball?')$$, '42501', NULL,
                 'a role outside kvg_user cannot ask the library');
RESET ROLE;
SELECT is(current_user, 'postgres'::name, 'identity restored after every call');
SELECT is(pg_temp.orphan_objects(), 0::bigint, 'no orphan large objects');

SELECT * FROM finish();
ROLLBACK;
