-- How failures reach the client: kvg errors as SQLSTATEs with a hint
-- (docs/sql-errors.md), PostgreSQL errors unchanged.
SET search_path = kvg, public;
\getenv fixtures KVG_FIXTURES
SELECT pg_read_binary_file(:'fixtures' || '/root.kvga') AS root \gset

-- Damaged input is refused before anything is stored: XX001 data_corrupted.
SELECT count(*) AS stored_before FROM artifacts \gset
SELECT kvg_import(substring(:'root'::bytea FROM 1 FOR 100), verify => false);
\echo :LAST_ERROR_SQLSTATE
SELECT kvg_import(:'root'::bytea || '\x00'::bytea, verify => false);
\echo :LAST_ERROR_SQLSTATE
SELECT kvg_import(set_byte(:'root'::bytea, 300, get_byte(:'root'::bytea, 300) # 1), verify => false);
\echo :LAST_ERROR_SQLSTATE
SELECT kvg_import('\x0000000000', verify => false);
\echo :LAST_ERROR_SQLSTATE
-- A version this build cannot read: 0A000 feature_not_supported.
SELECT kvg_import(set_byte(:'root'::bytea, 4, 2), verify => false);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) - :stored_before AS stored FROM artifacts;

-- Not a SHA-256: 22023 invalid_parameter_value. Unknown: 42704 undefined_object.
SELECT kvg_export('not a hash');
\echo :LAST_ERROR_SQLSTATE
SELECT kvg_artifact_verify(repeat('ab', 32));
\echo :LAST_ERROR_SQLSTATE
SELECT kvg_export(upper(repeat('ab', 32)));
\echo :LAST_ERROR_SQLSTATE
-- The functions are strict.
SELECT kvg_import(NULL) IS NULL AS null_in_null_out, kvg_export(NULL) IS NULL AS null_export;

-- A read-only transaction stores no artifact (the audit writer would store
-- it, but this transaction could not claim it): PostgreSQL's SQLSTATE.
BEGIN TRANSACTION READ ONLY;
SELECT kvg_import(:'root', verify => false);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;

-- ... and can be caught like any other (a subtransaction rolls back cleanly).
DO $$
BEGIN
  PERFORM public.kvg_import('\x00', verify => false);
EXCEPTION WHEN data_corrupted THEN
  RAISE NOTICE 'caught % from kvg_import', SQLSTATE;
END
$$;
SELECT kvg_import(:'root', verify => false) = encode(sha256(:'root'), 'hex') AS still_works;

-- Cancellation: statement_timeout stops a long call with the usual error,
-- and nothing of it is stored.
SELECT count(*) AS stored_before FROM artifacts \gset
SET statement_timeout = '20ms';
-- (Where it stops varies, so the error's context is not shown.)
\set SHOW_CONTEXT never
SELECT count(kvg_import(pg_read_binary_file(:'fixtures' || '/large.kvga'), verify => false)) FROM generate_series(1, 1000);
\echo :LAST_ERROR_SQLSTATE
\set SHOW_CONTEXT errors
RESET statement_timeout;
SELECT count(*) - :stored_before AS stored FROM artifacts;
SELECT * FROM kvg_audit_verify();

-- kvg.model naming something that is not a model: a wrong setting (22023),
-- saying which file and what it is not.
SET kvg.model = '/etc/passwd';
SELECT kvg_model_info();
\echo :LAST_ERROR_SQLSTATE
SET kvg.model = '/';
SELECT kvg_model_info();
\echo :LAST_ERROR_SQLSTATE
RESET kvg.model;
