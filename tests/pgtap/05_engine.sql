-- The engine functions as a kvg_user sees them, cancellation from another
-- session, rollback of a capture, and a model switch.
BEGIN;
SELECT plan(21);
\ir fixtures.psql
\getenv data KVG_TEST_DATA
\set small :data '/models/stories260K.gguf'
\set other :data '/models/TinyStories-656K-Q8_0.gguf'
SELECT set_config('kvg.model', :'small', true) \g /dev/null

-- Cancel a long generation running in another session (with worker threads).
-- First, while this transaction holds no audit rows: an audited call keeps
-- the chain head locked until its transaction ends (docs/audit-chain.md), so
-- the other session's calls would otherwise wait for this one.
SELECT dblink_connect('b', format('dbname=%s host=%s port=%s user=%s', current_database(),
                                  current_setting('unix_socket_directories'), current_setting('port'), current_user))
\g /dev/null
SELECT dblink_exec('b', format('SET kvg.model = %L', :'small')) \g /dev/null
SELECT dblink_exec('b', 'SET kvg.threads = 2') \g /dev/null
SELECT pid AS b_pid FROM dblink('b', 'SELECT pg_backend_pid()') AS t(pid int) \gset
SELECT dblink_send_query('b', $$SELECT count(public.kvg_generate('Once upon a time', 256)) FROM generate_series(1, 100000)$$)
\g /dev/null
SELECT pg_sleep(0.5) \g /dev/null
SELECT ok(pg_cancel_backend(:b_pid), 'cancel sent');
SET LOCAL client_min_messages = warning;
SELECT * FROM dblink_get_result('b', false) AS t(n bigint) \g /dev/null
RESET client_min_messages;
SELECT matches(dblink_error_message('b'), 'canceling statement due to user request', 'the call stops with the usual error');
SELECT * FROM dblink_get_result('b', false) AS t(n bigint) \g /dev/null
SELECT is((SELECT n FROM dblink('b', $$SELECT length(public.kvg_generate('Once upon a time', 8))$$) AS t(n int)) > 0, true,
          'the cancelled session keeps working');
SELECT dblink_disconnect('b') \g /dev/null

CREATE ROLE tap_writer IN ROLE kvg_user;
SET ROLE tap_writer;
SELECT lives_ok($$SELECT public.kvg_capture('Once upon a time')$$, 'kvg_user captures');
SELECT public.kvg_capture('Once upon a time') AS a \gset
SELECT public.kvg_capture(', there was', :'a') AS b \gset
SELECT is(public.kvg_generate(' there', 12, :'a'), public.kvg_generate('Once upon a time there', 12),
          'kvg_user generates after a graft, exactly as without it');
SELECT ok((SELECT exact FROM public.kvg_graft_check(:'b', ' a little', 1)), 'kvg_user runs a graft check: exact');
SELECT throws_ok($$SET kvg.model = '/etc/passwd'$$, '42501', NULL, 'kvg_user cannot change the model');
RESET ROLE;
SELECT is((SELECT count(*) FROM kvg.audit WHERE role = 'tap_writer'), 6::bigint,
          'one audit row per engine call (3 captures, 2 generations, 1 graft check)');
SELECT is((SELECT created_by FROM kvg.artifacts WHERE sha256 = :'b'), 'tap_writer'::name, 'the artifact names its creator');
SELECT is(m.lomowner, n.nspowner, 'the captured large object belongs to the schema owner')
FROM kvg.artifacts a JOIN pg_largeobject_metadata m ON m.oid = a.loid, pg_namespace n
WHERE a.sha256 = :'b' AND n.nspname = 'kvg';

-- A rolled-back capture leaves its artifact, committed by the audit writer,
-- but no claim on it (kvg_vacuum collects it: docs/audit-chain.md,
-- "Artifacts"); its audit row stays (the call returned its result), naming
-- the rolled-back (sub)transaction.
SAVEPOINT before_capture;
SELECT public.kvg_capture('The dog ran to the park') AS rolled_back \gset
ROLLBACK TO before_capture;
SELECT is((SELECT count(*) FROM kvg.artifacts WHERE sha256 = :'rolled_back'), 1::bigint,
          'rolled back: the audit writer''s row stays');
SELECT is((SELECT count(*) FROM kvg.artifact_claims WHERE sha256 = :'rolled_back'), 0::bigint,
          'rolled back: nothing claims it');
SELECT is((SELECT string_agg(pg_xact_status(caller_xid), ',') FROM kvg.audit WHERE artifact_sha256 = :'rolled_back'),
          'aborted', 'rolled back: its audit row stays, naming a caller that rolled back');

-- Another model: the setting change reloads, and old artifacts are refused.
SELECT public.kvg_model_info()->>'fingerprint' AS small_fingerprint \gset
SELECT set_config('kvg.model', :'other', true) \g /dev/null
SELECT isnt(public.kvg_model_info()->>'fingerprint', :'small_fingerprint', 'changing kvg.model loads the other model');
SELECT throws_ok(format('SELECT public.kvg_generate(%L, 4, %L)', ' there', :'a'), '22V01', NULL,
                 'an artifact of another model is refused with 22V01');
CREATE FUNCTION pg_temp.hint_of(statement text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
  hint text;
BEGIN
  EXECUTE statement;
  RETURN NULL;
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS hint = PG_EXCEPTION_HINT;
  RETURN hint;
END $f$;
SELECT matches(pg_temp.hint_of(format('SELECT public.kvg_generate(%L, 4, %L)', ' there', :'a')),
               'not the one the artifact was captured with.*kvg_model_info\(\).*model_fingerprint',
               'its hint says kvg.model names another model than the artifact''s, and how to find the right one');
SELECT lives_ok($$SELECT public.kvg_generate('Once upon a time', 4)$$, 'the other model generates');
SELECT set_config('kvg.model', :'small', true) \g /dev/null
SELECT is(public.kvg_model_info()->>'fingerprint', :'small_fingerprint', 'and back');

-- kvg.device: a GPU computes the same bits as the CPU (portable recipe);
-- without a usable one, cuda is refused and auto falls back to the CPU.
SELECT set_config('kvg.device', 'cpu', true) \g /dev/null
SELECT public.kvg_generate('Once upon a time', 32) AS cpu_story \gset
SELECT set_config('kvg.device', 'auto', true) \g /dev/null
SELECT public.kvg_model_info()->>'device' = 'cuda' AS has_gpu \gset
SELECT is(public.kvg_generate('Once upon a time', 32), :'cpu_story', 'auto generates what cpu generates');
SELECT set_config('kvg.device', 'cuda', true) \g /dev/null
SELECT (public.kvg_model_info()->>'gpu_weight_uploads')::int AS uploads_before \gset
\if :has_gpu
SELECT is(public.kvg_generate('Once upon a time', 32), :'cpu_story', 'cuda generates what cpu generates');
SELECT public.kvg_generate('Once upon a time', 4) FROM generate_series(1, 3) \g /dev/null
SELECT is((public.kvg_model_info()->>'gpu_weight_uploads')::int, :uploads_before,
          'the weights stay on the GPU from call to call of a backend (uploaded by the auto call above)');
\else
SELECT is(:uploads_before, 0, 'a backend without a GPU uploads no weights');
SELECT throws_ok($$SELECT public.kvg_generate('Once upon a time', 4)$$, '0A000', NULL,
                 'kvg.device = cuda without a usable GPU is refused');
\endif

SELECT * FROM finish();
ROLLBACK;
