-- The audit row's one column table (extension/src/audit/audit_row.cpp), from which
-- the audit writer's insert and a standby's forwarded row are made, is
-- kvg.audit_insert's signature and names columns of kvg.audit with their
-- types: a column added in one place and not the others fails here.
BEGIN;
SELECT plan(4);

CREATE TEMP TABLE insert_parameter AS
SELECT a.n AS position, p.proargnames[a.n] AS name, format_type(p.proargtypes[a.n - 1], NULL) AS sql_type
FROM pg_proc p, generate_series(1, (SELECT pronargs FROM pg_proc WHERE oid = 'kvg.audit_insert'::regproc)) AS a(n)
WHERE p.oid = 'kvg.audit_insert'::regproc;

SELECT cmp_ok((SELECT count(*) FROM kvg.audit_columns()), '>=', 30::bigint, 'the column table is there');
SELECT is(ARRAY(SELECT row(position, name, sql_type)::text FROM kvg.audit_columns() ORDER BY position),
          ARRAY(SELECT row(position, name, sql_type)::text FROM insert_parameter ORDER BY position),
          'the C++ column table is kvg.audit_insert''s parameters: names, order and types');
-- template_text is kept beside the row (kvg.knowledge_templates), not in it.
SELECT is(ARRAY(SELECT c.name FROM kvg.audit_columns() c
                WHERE c.name <> 'template_text' AND NOT EXISTS (SELECT FROM pg_attribute a
                                  WHERE a.attrelid = 'kvg.audit'::regclass AND a.attname = c.name
                                    AND format_type(a.atttypid, a.atttypmod) = c.sql_type AND NOT a.attisdropped)
                ORDER BY c.position),
          ARRAY[]::text[], 'every column of the table is a column of kvg.audit, of the same type');
SELECT is(ARRAY(SELECT a.attname::text FROM pg_attribute a
                WHERE a.attrelid = 'kvg.audit'::regclass AND a.attnum > 0 AND NOT a.attisdropped
                  AND a.attname NOT IN (SELECT name FROM kvg.audit_columns())
                ORDER BY a.attnum),
          ARRAY['id', 'seq', 'at', 'row_encoding', 'prev_hash', 'row_hash'],
          'what kvg.audit has beyond them is what the chain itself sets');

SELECT * FROM finish();
ROLLBACK;
