-- The primary's side of audit forwarding (docs/scale-out.md): what a hot
-- standby's kvg_audit_writer may append through kvg.audit_append_forwarded,
-- and that such a row is a link of the one chain like any other. The
-- two-server test is tests/replica/replica_test.sh.
BEGIN;
SELECT plan(14);
\ir audit_encoding.psql

CREATE ROLE tap_standby LOGIN IN ROLE kvg_audit_writer;
CREATE ROLE tap_bob IN ROLE kvg_user;

SELECT ok(pg_has_role('tap_standby', 'kvg_audit_writer', 'USAGE'), 'a standby''s role is a member of kvg_audit_writer');
SELECT ok(NOT has_function_privilege('kvg_user', 'kvg.audit_append_forwarded(text, text, text, text, text, text, text, text, integer, integer, integer, text, bigint, boolean, text, bigint, bigint, bigint, boolean, bytea)', 'EXECUTE'),
          'kvg_user cannot append forwarded rows');
SELECT ok(NOT has_table_privilege('kvg_audit_writer', 'kvg.audit', 'SELECT, INSERT')
          AND NOT has_table_privilege('kvg_audit_writer', 'kvg.audit_head', 'SELECT, UPDATE'),
          'kvg_audit_writer reads and writes no audit table itself');

SET ROLE tap_standby;
-- What a standby sends for an answer it gave to tap_bob.
CREATE TEMP TABLE forwarded AS
SELECT * FROM kvg.audit_append_forwarded(
  'answer', 'tap_bob', repeat('d', 64), 'f32-portable-v1', encode(sha256(convert_to('What color is the sky?', 'UTF8')), 'hex'),
  repeat('3', 64), encode(sha256('\x626c7565ff'::bytea), 'hex'), NULL, 40, 3, 39, 'recurring', 7, true,
  E'blue\uFFFD', 812, 35, 410, true, '\x626c7565ff'::bytea);
SELECT is(count(*), 1::bigint, 'one row appended: its id, seq and row_hash come back') FROM forwarded
WHERE id IS NOT NULL AND seq IS NOT NULL AND row_hash ~ '^[0-9a-f]{64}$';
SELECT throws_ok($$SELECT * FROM kvg.audit_append_forwarded('learn', 'tap_bob', NULL, NULL, NULL, NULL, NULL, NULL,
                    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)$$,
                 '22023', 'a standby does not learn: such a row is not forwarded',
                 'a row of what only a primary does is refused');
SELECT throws_ok($$SELECT * FROM kvg.audit_append_forwarded('answer', 'tap_nobody_here', NULL, NULL, NULL, NULL, NULL,
                    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)$$,
                 '22023', 'role "tap_nobody_here" does not exist here', 'an unknown role is refused');
SELECT throws_ok($$SELECT * FROM kvg.audit_append_forwarded('generate', 'tap_bob', NULL, NULL, NULL, NULL,
                    repeat('0', 64), NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'blue', NULL, NULL, NULL, NULL, NULL)$$,
                 '22023', 'output_sha256 is not the SHA-256 of the forwarded output',
                 'an output hash that does not cover the output is refused');
SELECT throws_ok($$SELECT * FROM kvg.audit$$, '42501', NULL, 'the writer cannot read the audit');
RESET ROLE;

SELECT is(a.seq, f.seq, 'the row is linked at the seq returned') FROM kvg.audit a JOIN forwarded f USING (id);
SELECT is(a.row_hash, pg_temp.documented_row_hash(a), 'its row_hash is the documented encoding')
FROM kvg.audit a JOIN forwarded f USING (id);
SELECT is(a.role::text || ' ' || a.operation || ' ' || a.mode || ' ' || encode(a.output_bytes, 'hex'),
          'tap_bob answer recurring 626c7565ff', 'the row names the standby''s caller and keeps the raw output')
FROM kvg.audit a JOIN forwarded f USING (id);
SELECT is((SELECT last_seq FROM kvg.audit_head), (SELECT seq FROM forwarded), 'the head moved to it');
SELECT ok(a.caller_xid IS NULL AND a.session_role IS NULL,
          'a forwarded row names no transaction or session of this server')
FROM kvg.audit a JOIN forwarded f USING (id);
SELECT is((public.kvg_audit_verify()).ok, true, 'the chain verifies');

SELECT * FROM finish();
ROLLBACK;
