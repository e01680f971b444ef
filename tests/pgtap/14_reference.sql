-- The SQL API is documented: every function of the extension has a COMMENT,
-- every one appears in docs/sql.md (a section of its own for each function
-- a role is granted: "### name(" ), and so does every kvg.* setting.
-- scripts/pg-test.sh stages docs/sql.md where the server reads it
-- ($KVG_TEST_DATA/docs/sql.md).
BEGIN;
SELECT plan(4);
\getenv data KVG_TEST_DATA
SELECT pg_read_file(:'data' || '/docs/sql.md') AS doc \gset
LOAD 'kvg';  -- its settings exist once the module is loaded

CREATE TEMP TABLE member_function AS
  SELECT p.oid, p.pronamespace::regnamespace::text AS schema, p.proname::text AS name,
         CASE WHEN p.pronamespace = 'public'::regnamespace THEN p.proname::text
              ELSE 'kvg.' || p.proname END AS documented_as,
         obj_description(p.oid, 'pg_proc') AS comment,
         p.proacl IS NOT NULL AND EXISTS (
           SELECT FROM aclexplode(p.proacl) x
           WHERE x.grantee <> p.proowner AND x.privilege_type = 'EXECUTE') AS granted
  FROM pg_proc p
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
  WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'kvg');

SELECT cmp_ok((SELECT count(*) FROM member_function), '>=', 30::bigint, 'the extension''s functions are found');
SELECT is(ARRAY(SELECT documented_as FROM member_function WHERE coalesce(comment, '') = '' ORDER BY 1),
          ARRAY[]::text[], 'every function of the extension has a COMMENT');
-- A user-facing function (in public, or granted to a role) has its own
-- section; an internal one is at least named.
SELECT is(ARRAY(SELECT documented_as FROM member_function f
                WHERE CASE WHEN f.schema = 'public' THEN strpos(:'doc', E'\n### ' || f.documented_as || '(') = 0
                           WHEN f.granted THEN strpos(:'doc', '`' || f.documented_as || '(') = 0
                           ELSE strpos(:'doc', '`' || f.documented_as || '`') = 0
                                AND strpos(:'doc', '`' || f.documented_as || '(') = 0 END
                ORDER BY 1),
          ARRAY[]::text[], 'every function of the extension is in docs/sql.md');
SELECT is(ARRAY(SELECT name FROM pg_settings WHERE name LIKE 'kvg.%'
                  AND strpos(:'doc', E'\n### ' || name || E'\n') = 0 ORDER BY 1),
          ARRAY[]::text[], 'every kvg.* setting has a section in docs/sql.md');

SELECT * FROM finish();
ROLLBACK;
