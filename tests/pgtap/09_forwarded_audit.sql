-- The primary's side of audit forwarding (docs/scale-out.md): what a hot
-- standby's kvg_audit_writer may append through kvg.audit_append_forwarded,
-- and that such a row is a link of the one chain like any other. The
-- two-server test is tests/replica/replica_test.sh.
BEGIN;
SELECT plan(17);
\ir audit_encoding.psql

CREATE ROLE tap_standby LOGIN IN ROLE kvg_audit_writer;
CREATE ROLE tap_bob IN ROLE kvg_user;

SELECT ok(pg_has_role('tap_standby', 'kvg_audit_writer', 'USAGE'), 'a standby''s role is a member of kvg_audit_writer');
SELECT ok(NOT has_function_privilege('kvg_user', 'kvg.audit_append_forwarded(jsonb)', 'EXECUTE'),
          'kvg_user cannot append forwarded rows');
SELECT ok(NOT has_table_privilege('kvg_audit_writer', 'kvg.audit', 'SELECT, INSERT')
          AND NOT has_table_privilege('kvg_audit_writer', 'kvg.audit_head', 'SELECT, UPDATE'),
          'kvg_audit_writer reads and writes no audit table itself');

SET ROLE tap_standby;
-- What a standby sends for an answer it gave to tap_bob.
CREATE TEMP TABLE forwarded AS
SELECT * FROM kvg.audit_append_forwarded(jsonb_build_object(
  'operation', 'answer', 'role', 'tap_bob', 'session_role', 'tap_bob', 'model_fingerprint', repeat('d', 64),
  'recipe', 'f32-portable-v1', 'input_sha256', encode(sha256(convert_to('What color is the sky?', 'UTF8')), 'hex'),
  'artifact_sha256', repeat('3', 64), 'output_sha256', encode(sha256('\x626c7565ff'::bytea), 'hex'),
  'tokens_in', '40', 'tokens_out', '3', 'tokens_grafted', '39', 'mode', 'recurring', 'knowledge_id', '7',
  'verified', 'true', 'output_text', E'blue\uFFFD', 'graft_us', '812', 'prefill_us', '35', 'decode_us', '410',
  'kv_proven', 'true', 'output_bytes', '\x626c7565ff', 'temperature', '0.8', 'top_p', '0.95', 'seed', '4242',
  'max_tokens', '32', 'stop_reason', 'eos', 'prompt_tokens_sha256', repeat('4', 64),
  'template_sha256', repeat('5', 64), 'artifact_chain', repeat('3', 64)));
SELECT is(count(*), 1::bigint, 'one row appended: its id, seq and row_hash come back') FROM forwarded
WHERE id IS NOT NULL AND seq IS NOT NULL AND row_hash ~ '^[0-9a-f]{64}$';
SELECT throws_ok($$SELECT * FROM kvg.audit_append_forwarded('{"operation": "learn", "role": "tap_bob"}')$$,
                 '22023', 'a standby does not learn: such a row is not forwarded',
                 'a row of what only a primary does is refused');
SELECT throws_ok($$SELECT * FROM kvg.audit_append_forwarded('{"operation": "answer", "role": "tap_nobody_here"}')$$,
                 '22023', 'role "tap_nobody_here" does not exist here', 'an unknown role is refused');
SELECT throws_ok($$SELECT * FROM kvg.audit_append_forwarded(
                    '{"operation": "generate", "role": "tap_bob", "output_sha256": "00", "output_text": "blue"}')$$,
                 '22023', 'output_sha256 is not the SHA-256 of the forwarded output',
                 'an output hash that does not cover the output is refused');
SELECT throws_ok($$SELECT * FROM kvg.audit_append_forwarded(
                    '{"operation": "generate", "role": "tap_bob", "temprature": "0.8"}')$$,
                 '22023', 'the forwarded row has fields that are no audit column: temprature',
                 'a field that is no audit column is refused by name');
SELECT throws_ok($$SELECT * FROM kvg.audit_append_forwarded(
                    '{"operation": "generate", "role": "tap_bob", "caller_xid": "1234"}')$$,
                 '22023', 'a forwarded row names no caller_xid: a standby''s transaction means nothing on the primary',
                 'a forwarded caller_xid is refused');
SELECT throws_ok($$SELECT * FROM kvg.audit_append_forwarded('{"operation": "generate", "role": "tap_bob", "seed": "many"}')$$,
                 '22P02', NULL, 'a field of the wrong type is its type''s error');
SELECT throws_ok($$SELECT * FROM kvg.audit$$, '42501', NULL, 'the writer cannot read the audit');
RESET ROLE;

SELECT is(a.seq, f.seq, 'the row is linked at the seq returned') FROM kvg.audit a JOIN forwarded f USING (id);
SELECT is(a.row_hash, pg_temp.documented_row_hash(a), 'its row_hash is the documented encoding')
FROM kvg.audit a JOIN forwarded f USING (id);
SELECT is(a.role::text || ' ' || a.operation || ' ' || a.mode || ' ' || encode(a.output_bytes, 'hex'),
          'tap_bob answer recurring 626c7565ff', 'the row names the standby''s caller and keeps the raw output')
FROM kvg.audit a JOIN forwarded f USING (id);
SELECT is((SELECT last_seq FROM kvg.audit_head), (SELECT seq FROM forwarded), 'the head moved to it');
SELECT is(row(a.caller_xid::text, a.session_role::text, a.temperature, a.top_p, a.seed, a.max_tokens,
              a.stop_reason, a.prompt_tokens_sha256, a.template_sha256, a.artifact_chain)::text,
          row(NULL::text, 'tap_bob', 0.8::float8, 0.95::float8, 4242::bigint, 32, 'eos', repeat('4', 64),
              repeat('5', 64), repeat('3', 64))::text,
          'a forwarded row keeps every reproduction field and the standby''s session role, and names no caller_xid')
FROM kvg.audit a JOIN forwarded f USING (id);
SELECT is((public.kvg_audit_verify()).ok, true, 'the chain verifies');

SELECT * FROM finish();
ROLLBACK;
