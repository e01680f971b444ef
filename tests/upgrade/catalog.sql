-- The catalog of extension kvg in this database, as sorted text lines, for
-- tests/upgrade/upgrade_equals_fresh.sh to diff between a database that was
-- upgraded and one installed fresh. It covers what a schema dump would, plus
-- what pg_dump leaves out for extension members: every member object, and
-- for each relation in schema kvg its columns (in order: a row type and
-- SELECT * depend on it), constraints, indexes, triggers, policies, options,
-- grants and comments; for each function its full definition (signature,
-- defaults, result, language, volatility, strictness, settings, body),
-- grants and comment; types, event triggers, the schema's grants, and the
-- tables pg_dump saves the rows of. Object identifiers (OIDs) never appear,
-- only names, so two databases compare. Roles are cluster-wide: both
-- databases see the same ones, so they are not listed.
\pset tuples_only on
\pset format unaligned
\pset fieldsep ' | '
WITH ext AS (
  SELECT oid, extnamespace FROM pg_extension WHERE extname = 'kvg'
), members AS (
  SELECT d.classid, d.objid, d.objsubid FROM pg_depend d, ext
  WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'
), rels AS (
  SELECT c.* FROM pg_class c, ext WHERE c.relnamespace = ext.extnamespace
), funcs AS (
  SELECT p.* FROM pg_proc p JOIN members m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
), acl(owner_kind, object, acl) AS (
  SELECT 'relation', oid::regclass::text, relacl FROM rels
  UNION ALL SELECT 'function', oid::regprocedure::text, proacl FROM funcs
  UNION ALL SELECT 'schema', n.nspname::text, n.nspacl FROM pg_namespace n, ext WHERE n.oid = ext.extnamespace
), lines(section, object, detail) AS (
  SELECT 'extension', 'kvg', format('relocatable=%s schema=%s', e.extrelocatable, e.extnamespace::regnamespace)
  FROM pg_extension e WHERE e.extname = 'kvg'
  UNION ALL
  SELECT 'dumped rows', c::regclass::text, coalesce(e.extcondition[i], '')
  FROM pg_extension e, unnest(e.extconfig) WITH ORDINALITY AS u(c, i) WHERE e.extname = 'kvg'
  UNION ALL
  SELECT 'member', pg_describe_object(classid, objid, objsubid), '' FROM members
  UNION ALL
  SELECT 'comment', pg_describe_object(d.classoid, d.objoid, d.objsubid), d.description
  FROM pg_description d
  WHERE (d.classoid, d.objoid) IN (SELECT classid, objid FROM members)
     OR (d.classoid = 'pg_class'::regclass AND d.objoid IN (SELECT oid FROM rels))
  UNION ALL
  SELECT 'grant', a.owner_kind || ' ' || a.object,
         format('%s to %s%s', x.privilege_type,
                CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(x.grantee)::text END,
                CASE WHEN x.is_grantable THEN ' with grant option' ELSE '' END)
  FROM acl a, aclexplode(a.acl) x
  -- The owner's own privileges follow from ownership; only what was granted
  -- or revoked to others matters.
  WHERE x.grantee <> x.grantor
  UNION ALL
  SELECT 'grant', a.owner_kind || ' ' || a.object, 'default privileges' FROM acl a WHERE a.acl IS NULL
  UNION ALL
  SELECT 'function', p.oid::regprocedure::text, pg_get_functiondef(p.oid)
  FROM funcs p WHERE p.prokind IN ('f', 'p', 'w')
  UNION ALL
  SELECT 'function', p.oid::regprocedure::text,
         format('kind=%s returns %s', p.prokind, p.prorettype::regtype)
  FROM funcs p WHERE p.prokind NOT IN ('f', 'p', 'w')
  UNION ALL
  SELECT 'relation', c.oid::regclass::text,
         format('kind=%s persistence=%s options=%s rls=%s force_rls=%s', c.relkind, c.relpersistence,
                coalesce(array_to_string(c.reloptions, ','), ''), c.relrowsecurity, c.relforcerowsecurity)
  FROM rels c
  UNION ALL
  SELECT 'column', c.oid::regclass::text || '.' || a.attname,
         format('#%s %s%s%s%s%s%s', row_number() OVER (PARTITION BY c.oid ORDER BY a.attnum),
                format_type(a.atttypid, a.atttypmod),
                CASE WHEN a.attnotnull THEN ' not null' ELSE '' END,
                CASE WHEN a.atthasdef THEN
                  CASE WHEN a.attgenerated = 's' THEN ' generated ' ELSE ' default ' END
                  || pg_get_expr(ad.adbin, ad.adrelid) ELSE '' END,
                CASE WHEN a.attidentity <> '' THEN ' identity ' || a.attidentity::text ELSE '' END,
                CASE WHEN a.attcollation <> 0 AND a.attcollation <> t.typcollation
                     THEN ' collate ' || a.attcollation::regcollation::text ELSE '' END,
                CASE WHEN a.attacl IS NOT NULL THEN ' acl ' || a.attacl::text ELSE '' END)
  FROM rels c
  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  JOIN pg_type t ON t.oid = a.atttypid
  LEFT JOIN pg_attrdef ad ON ad.adrelid = c.oid AND ad.adnum = a.attnum
  WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'c')
  UNION ALL
  SELECT 'constraint', co.conrelid::regclass::text || ' ' || co.conname, pg_get_constraintdef(co.oid)
  FROM pg_constraint co JOIN rels c ON c.oid = co.conrelid
  UNION ALL
  SELECT 'index', i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
  FROM pg_index i JOIN rels c ON c.oid = i.indrelid
  UNION ALL
  SELECT 'trigger', t.tgrelid::regclass::text || ' ' || t.tgname,
         pg_get_triggerdef(t.oid) || ' enabled=' || t.tgenabled::text
  FROM pg_trigger t JOIN rels c ON c.oid = t.tgrelid WHERE NOT t.tgisinternal
  UNION ALL
  SELECT 'policy', p.schemaname || '.' || p.tablename || ' ' || p.policyname,
         format('%s %s to %s using (%s) check (%s)', p.permissive, p.cmd, p.roles::text, p.qual, p.with_check)
  FROM pg_policies p, ext WHERE p.schemaname = ext.extnamespace::regnamespace::text
  UNION ALL
  SELECT 'view', c.oid::regclass::text, pg_get_viewdef(c.oid) FROM rels c WHERE c.relkind IN ('v', 'm')
  UNION ALL
  SELECT 'sequence', s.seqrelid::regclass::text,
         format('%s start %s increment %s min %s max %s cache %s cycle %s owned by %s', s.seqtypid::regtype,
                s.seqstart, s.seqincrement, s.seqmin, s.seqmax, s.seqcache, s.seqcycle,
                (SELECT d.refobjid::regclass::text || '.' || a.attname
                 FROM pg_depend d JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
                 WHERE d.classid = 'pg_class'::regclass AND d.objid = s.seqrelid AND d.deptype IN ('a', 'i')
                 LIMIT 1))
  FROM pg_sequence s JOIN rels c ON c.oid = s.seqrelid
  UNION ALL
  -- Types of their own (a table's row type is its columns, above).
  SELECT 'type', t.oid::regtype::text,
         format('type=%s %s', t.typtype,
                CASE t.typtype
                  WHEN 'e' THEN (SELECT string_agg(quote_literal(e.enumlabel), ', ' ORDER BY e.enumsortorder)
                                 FROM pg_enum e WHERE e.enumtypid = t.oid)
                  WHEN 'd' THEN format_type(t.typbasetype, t.typtypmod) || coalesce(' default ' || t.typdefault, '')
                                || CASE WHEN t.typnotnull THEN ' not null' ELSE '' END
                                || coalesce((SELECT ' ' || string_agg(pg_get_constraintdef(co.oid), ' ' ORDER BY co.conname)
                                             FROM pg_constraint co WHERE co.contypid = t.oid), '')
                  ELSE '' END)
  FROM pg_type t, ext
  WHERE t.typnamespace = ext.extnamespace AND t.typelem = 0 AND (t.typrelid = 0 OR t.typtype = 'c' AND
        (SELECT relkind FROM pg_class WHERE oid = t.typrelid) = 'c')
  UNION ALL
  SELECT 'event trigger', e.evtname,
         format('on %s when tag in (%s) execute %s enabled=%s', e.evtevent, array_to_string(e.evttags, ', '),
                e.evtfoid::regprocedure, e.evtenabled)
  FROM pg_event_trigger e
  JOIN members m ON m.classid = 'pg_event_trigger'::regclass AND m.objid = e.oid
)
SELECT section, object, detail FROM lines ORDER BY section, object, detail;
