-- kvg 0.1.0 -> 0.2.0: trust boundaries between the roles sharing a database
-- (docs/security.md).
--
--  * Artifacts carry their provenance; only KV known to be what this engine
--    computes for its tokens is grafted without being asked for.
--  * Function verifiers are pinned at deposit and run with the depositor's
--    rights as a security-restricted operation (extension/src/verifier.cpp);
--    depositing one needs the role kvg_author.
--  * Audit rows are linked into the hash chain when their transaction
--    commits, so an open transaction no longer holds the chain's head.
--  * kvg.audit has row-level security: a kvg_user sees its own rows, the role
--    kvg_auditor sees all of them and produces manifests.
--
-- CREATE EXTENSION kvg runs kvg--0.1.0.sql and then this script, so a new
-- installation and an upgraded one are the same schema by construction.

\echo Use "ALTER EXTENSION kvg UPDATE TO '0.2.0'" to load this file. \quit

DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'kvg_author') THEN
    CREATE ROLE kvg_author NOLOGIN;
  END IF;
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'kvg_auditor') THEN
    CREATE ROLE kvg_auditor NOLOGIN;
  END IF;
END
$$;
-- An author is a user who may also deposit entries checked by SQL functions.
GRANT kvg_user TO kvg_author;

-- Provenance ---------------------------------------------------------------------

-- computed    prefilled by this server's engine over a chain it trusts
-- verified    imported, then recomputed here from its tokens: the same bytes
-- unverified  imported without recomputation (kvg_import(..., verify => false))
-- derived     computed here, but continuing a chain that holds an unverified
--             link, so its KV is only as good as that link's
-- Trusted (grafted automatically) = computed or verified.
ALTER TABLE kvg.artifacts ADD COLUMN provenance text NOT NULL DEFAULT 'computed'
  CHECK (provenance IN ('computed', 'verified', 'unverified', 'derived'));
COMMENT ON COLUMN kvg.artifacts.provenance IS
  'How the KV came to be: computed | verified (imported and recomputed) | unverified (imported) | derived (computed over an unverified chain).';

-- Artifacts imported under 0.1.0 were never recomputed: unverified, and what
-- continues them derived. (Re-importing one with verification upgrades it.)
DROP TRIGGER artifacts_immutable ON kvg.artifacts;
WITH RECURSIVE untrusted AS (
  SELECT a.sha256, 'unverified'::text AS provenance FROM kvg.artifacts a
  WHERE EXISTS (SELECT FROM kvg.audit u WHERE u.operation = 'import' AND u.artifact_sha256 = a.sha256)
  UNION
  SELECT c.sha256, 'derived' FROM kvg.artifacts c JOIN untrusted p ON c.parent_sha256 = p.sha256
)
UPDATE kvg.artifacts a SET provenance = u.provenance
FROM (SELECT DISTINCT ON (sha256) sha256, provenance FROM untrusted ORDER BY sha256, provenance DESC) u
WHERE a.sha256 = u.sha256;

-- An artifact row states a fact about content-addressed bytes: nothing in it
-- changes, except that an unverified or derived artifact may be proven later
-- (a verified re-import recomputes it).
CREATE FUNCTION kvg.artifact_update_check() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF OLD.provenance IN ('unverified', 'derived') AND NEW.provenance IN ('verified', 'computed')
     AND (to_jsonb(NEW) - 'provenance') = (to_jsonb(OLD) - 'provenance') THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'rows of kvg.artifacts are immutable: UPDATE is not allowed'
    USING ERRCODE = 'insufficient_privilege',
          HINT = 'An artifact is identified by its bytes; store changed bytes as a new artifact.';
END
$$;
CREATE TRIGGER artifacts_immutable BEFORE UPDATE ON kvg.artifacts
  FOR EACH ROW EXECUTE FUNCTION kvg.artifact_update_check();

-- What each role has stored, and how much of it was imported (the part
-- kvg.import_quota bounds).
CREATE VIEW kvg.storage_usage AS
SELECT created_by AS role,
       count(*) AS artifacts,
       sum(bytes) AS bytes,
       count(*) FILTER (WHERE provenance IN ('verified', 'unverified')) AS imported,
       coalesce(sum(bytes) FILTER (WHERE provenance IN ('verified', 'unverified')), 0) AS imported_bytes
FROM kvg.artifacts
GROUP BY created_by;
COMMENT ON VIEW kvg.storage_usage IS 'Artifacts and bytes stored per role; imports count against kvg.import_quota.';

DROP FUNCTION public.kvg_import(bytea);
CREATE FUNCTION public.kvg_import(data bytea, verify boolean DEFAULT true) RETURNS text
AS 'MODULE_PATHNAME', 'kvg_import' LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION public.kvg_import(bytea, boolean) IS
  'Validates an artifact, recomputes its KV with kvg.model and refuses it unless the bytes are equal (verify), '
  'stores it once and returns its SHA-256. verify => false stores it unverified: never grafted unless asked for.';

-- Pinned verifiers ---------------------------------------------------------------

-- What a function verifier is pinned to: its definition (schema, name,
-- arguments, language, body, volatility, SECURITY DEFINER, SET options) and
-- its owner. A verifier whose pin changed is not run: the entry fails closed.
CREATE FUNCTION kvg.function_pin(fn regprocedure) RETURNS text
LANGUAGE sql STABLE STRICT SET search_path = pg_catalog, pg_temp
AS $$
  SELECT encode(sha256(convert_to(
           'kvg-verifier-pin-v1' || E'\n' || pg_get_functiondef(p.oid) || E'\n'
           || pg_get_userbyid(p.proowner)::text || E'\n' || p.prosecdef::text || E'\n'
           || coalesce(array_to_string(p.proconfig, E'\n'), ''),
         'UTF8')), 'hex')
  FROM pg_proc p WHERE p.oid = fn
$$;

ALTER TABLE kvg.knowledge ADD COLUMN verifier_pin text CHECK (verifier_pin ~ '^[0-9a-f]{64}$');
COMMENT ON COLUMN kvg.knowledge.verifier_pin IS
  'For a function verifier: kvg.function_pin at deposit. NULL (for a function) fails closed: learn it again.';

-- The built-in verifiers only; function verifiers run from C with the
-- depositor's rights (extension/src/verifier.cpp), never through here.
CREATE OR REPLACE FUNCTION kvg.verify(verifier text, question text, candidate text, reference text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF verifier = 'contains' THEN
    RETURN kvg.answer_words(reference) <> ''
       AND position(' ' || kvg.answer_words(reference) || ' ' IN ' ' || kvg.answer_words(candidate) || ' ') > 0;
  ELSIF starts_with(verifier, 'exact:') THEN
    RETURN kvg.answer_words(candidate) = kvg.answer_words(substr(verifier, 7));
  ELSIF starts_with(verifier, 'regex:') THEN
    RETURN candidate ~ substr(verifier, 7);
  END IF;
  RAISE EXCEPTION 'kvg.verify runs the built-in verifiers only, not %', verifier
    USING ERRCODE = 'invalid_parameter_value';
END
$$;

-- Audit: linked at commit -----------------------------------------------------------

-- seq        the row's place in the chain (1, 2, ...: gap-free), given when
--            its transaction commits; id is given when the call is made, so
--            ids are unique but need not follow the chain.
-- kv_proven  every KV the call grafted or stored is known to be what this
--            engine computes for its tokens (false: an unverified artifact
--            was grafted on request, or an import was not recomputed).
-- row_encoding  the canonical encoding row_hash is computed with; rows
--            written by 0.1.0 keep kvg-audit-v2 (docs/audit-chain.md).
-- output_bytes  the raw output when it is not exactly output_text's UTF-8
--            (see "Output bytes" below).
ALTER TABLE kvg.audit ADD COLUMN seq bigint, ADD COLUMN kv_proven boolean,
  ADD COLUMN row_encoding text NOT NULL DEFAULT 'kvg-audit-v3'
    CHECK (row_encoding IN ('kvg-audit-v2', 'kvg-audit-v3')),
  ADD COLUMN output_bytes bytea;
ALTER TABLE kvg.audit DISABLE TRIGGER audit_append_only;
UPDATE kvg.audit a SET seq = n.seq, row_encoding = 'kvg-audit-v2'
FROM (SELECT id, row_number() OVER (ORDER BY id) AS seq FROM kvg.audit) n WHERE n.id = a.id;
ALTER TABLE kvg.audit ENABLE TRIGGER audit_append_only;
ALTER TABLE kvg.audit ALTER COLUMN seq SET NOT NULL, ADD UNIQUE (seq);

ALTER TABLE kvg.audit_head ADD COLUMN last_seq bigint;
UPDATE kvg.audit_head h SET last_seq = (SELECT a.seq FROM kvg.audit a WHERE a.id = h.last_id);

CREATE OR REPLACE FUNCTION kvg.audit_row_hash(a kvg.audit) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $$
  SELECT encode(sha256(convert_to(
           a.row_encoding || E'\n'
           || kvg.audit_field(a.id::text)
           || CASE WHEN a.row_encoding = 'kvg-audit-v3' THEN kvg.audit_field(a.seq::text) ELSE '' END
           || kvg.audit_field((extract(epoch FROM a.at) * 1000000)::bigint::text)
           || kvg.audit_field(a.role::text)
           || kvg.audit_field(a.operation)
           || kvg.audit_field(a.model_fingerprint)
           || kvg.audit_field(a.recipe)
           || kvg.audit_field(a.input_sha256)
           || kvg.audit_field(a.artifact_sha256)
           || kvg.audit_field(a.output_sha256)
           || kvg.audit_field(a.logits_sha256)
           || kvg.audit_field(a.tokens_in::text)
           || kvg.audit_field(a.tokens_out::text)
           || kvg.audit_field(a.tokens_grafted::text)
           || kvg.audit_field(a.mode)
           || kvg.audit_field(a.knowledge_id::text)
           || kvg.audit_field(CASE WHEN a.verified THEN 'true' WHEN NOT a.verified THEN 'false' END)
           || kvg.audit_field(a.output_text)
           || kvg.audit_field(a.graft_us::text)
           || kvg.audit_field(a.prefill_us::text)
           || kvg.audit_field(a.decode_us::text)
           || CASE WHEN a.row_encoding = 'kvg-audit-v3'
                   THEN kvg.audit_field(CASE WHEN a.kv_proven THEN 'true' WHEN NOT a.kv_proven THEN 'false' END)
                        || kvg.audit_field(encode(a.output_bytes, 'hex'))
                   ELSE '' END
           || kvg.audit_field(a.prev_hash),
         'UTF8')), 'hex')
$$;

-- Calls write here; the row moves into kvg.audit, linked, when the
-- transaction commits (kvg.audit_link). Never dumped: it is empty between
-- transactions.
CREATE TABLE kvg.audit_pending (LIKE kvg.audit INCLUDING CONSTRAINTS);
ALTER TABLE kvg.audit_pending ALTER COLUMN seq DROP NOT NULL, ALTER COLUMN prev_hash DROP NOT NULL,
  ALTER COLUMN row_hash DROP NOT NULL, ADD PRIMARY KEY (id);
COMMENT ON TABLE kvg.audit_pending IS
  'Audit rows of transactions still in progress; linked into kvg.audit at commit.';

DROP FUNCTION kvg.audit_insert(text, name, text, text, text, text, text, text, integer, integer, integer, text,
                               bigint, boolean, text, bigint, bigint, bigint);
-- The only insert path (called by the C code's audit_append with the owner's
-- rights): a pending row with its id; returns the id.
CREATE FUNCTION kvg.audit_insert(operation text, role name, model_fingerprint text, recipe text,
                                 input_sha256 text, artifact_sha256 text, output_sha256 text,
                                 logits_sha256 text, tokens_in integer, tokens_out integer,
                                 tokens_grafted integer DEFAULT NULL, mode text DEFAULT NULL,
                                 knowledge_id bigint DEFAULT NULL, verified boolean DEFAULT NULL,
                                 output_text text DEFAULT NULL, graft_us bigint DEFAULT NULL,
                                 prefill_us bigint DEFAULT NULL, decode_us bigint DEFAULT NULL,
                                 kv_proven boolean DEFAULT NULL, output_bytes bytea DEFAULT NULL)
RETURNS bigint
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
  INSERT INTO kvg.audit_pending (id, at, role, operation, model_fingerprint, recipe, input_sha256, artifact_sha256,
                                 output_sha256, logits_sha256, tokens_in, tokens_out, tokens_grafted, mode,
                                 knowledge_id, verified, output_text, graft_us, prefill_us, decode_us, kv_proven,
                                 row_encoding, output_bytes)
  VALUES (nextval('kvg.audit_id_seq'), clock_timestamp(), role, operation, model_fingerprint, recipe, input_sha256,
          artifact_sha256, output_sha256, logits_sha256, tokens_in, tokens_out, tokens_grafted, mode, knowledge_id,
          verified, output_text, graft_us, prefill_us, decode_us, kv_proven, 'kvg-audit-v3', output_bytes)
  RETURNING id
$$;

-- Moves pending row link_id into kvg.audit at chain position link_seq after
-- prev_hash, and returns its row_hash. Called by kvg_audit_link only, with
-- the chain's lock held.
CREATE FUNCTION kvg.audit_move_pending(link_id bigint, link_seq bigint, prev_hash text) RETURNS text
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  r kvg.audit;  -- kvg.audit_pending has the same columns in the same order
BEGIN
  DELETE FROM kvg.audit_pending p WHERE p.id = link_id RETURNING p.* INTO STRICT r;
  r.seq := link_seq;
  r.prev_hash := audit_move_pending.prev_hash;
  r.row_hash := kvg.audit_row_hash(r);
  INSERT INTO kvg.audit SELECT r.*;
  RETURN r.row_hash;
END
$$;

-- Fires when the inserting transaction commits: kvg_audit_link (C) takes the
-- chain's lock, reads the head with a fresh snapshot (so REPEATABLE READ and
-- SERIALIZABLE transactions link too) and moves the row into kvg.audit.
CREATE FUNCTION kvg.audit_link() RETURNS trigger
AS 'MODULE_PATHNAME', 'kvg_audit_link' LANGUAGE C;
CREATE CONSTRAINT TRIGGER audit_link_at_commit AFTER INSERT ON kvg.audit_pending
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION kvg.audit_link();

-- The first chain position that does not verify, as the id of its row; NULL
-- when the whole chain does (docs/audit-chain.md). Rows are taken in seq
-- order; the head must name the last one.
CREATE FUNCTION kvg.audit_first_bad() RETURNS bigint
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
  WITH chain AS (
    SELECT a.id, a.seq, a.prev_hash, a.row_hash, kvg.audit_row_hash(a) AS recomputed,
           lag(a.row_hash, 1, repeat('0', 64)) OVER (ORDER BY a.seq) AS expected_prev,
           row_number() OVER (ORDER BY a.seq) AS position
    FROM kvg.audit a
  ), last AS (
    SELECT id, seq, row_hash FROM kvg.audit ORDER BY seq DESC LIMIT 1
  ), tail AS (
    SELECT CASE
             WHEN h.singleton IS NULL THEN (SELECT id FROM kvg.audit ORDER BY seq LIMIT 1)
             WHEN l.id IS NULL THEN h.last_id
             WHEN h.last_seq IS NULL OR h.last_seq < l.seq THEN
               (SELECT id FROM kvg.audit WHERE seq > coalesce(h.last_seq, 0) ORDER BY seq LIMIT 1)
             WHEN h.last_seq > l.seq OR h.last_hash IS DISTINCT FROM l.row_hash THEN h.last_id
           END AS id
    FROM last l FULL JOIN kvg.audit_head h ON true
  )
  SELECT coalesce(
    (SELECT id FROM chain
      WHERE row_hash IS DISTINCT FROM recomputed OR prev_hash IS DISTINCT FROM expected_prev
         OR seq IS DISTINCT FROM position
      ORDER BY seq LIMIT 1),
    (SELECT id FROM tail))
$$;

-- Every caller verifies the whole chain, whatever rows it may read: the C
-- function runs kvg.audit_first_bad with the owner's rights.
DROP FUNCTION public.kvg_audit_verify();
CREATE FUNCTION public.kvg_audit_verify() RETURNS bigint
AS 'MODULE_PATHNAME', 'kvg_audit_verify' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION public.kvg_audit_verify() IS
  'NULL when the whole hash-chained audit trail verifies, else the id of the first row that does not.';

-- Who sees what: a kvg_user its own rows, kvg_auditor every row. The owner
-- (who writes them) is not subject to the policies.
ALTER TABLE kvg.audit ENABLE ROW LEVEL SECURITY;
CREATE POLICY audit_own_rows ON kvg.audit FOR SELECT TO kvg_user USING (role = current_user);
CREATE POLICY audit_auditor_all ON kvg.audit FOR SELECT TO kvg_auditor USING (true);
-- Accounting over the rows the caller may see.
ALTER VIEW kvg.stats SET (security_invoker = true);

-- Manifests cover a stretch of the chain, by chain position (seq; for rows
-- written by 0.1.0 seq and id agree), so that consecutive rows link.
DROP FUNCTION public.kvg_manifest(bigint, bigint);
CREATE FUNCTION public.kvg_manifest(from_seq bigint DEFAULT NULL, to_seq bigint DEFAULT NULL) RETURNS jsonb
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
  SELECT jsonb_build_object(
    'format', 'kvg-manifest-v2',
    'from_seq', kvg_manifest.from_seq,
    'to_seq', kvg_manifest.to_seq,
    'head', (SELECT jsonb_build_object('last_id', h.last_id, 'last_seq', h.last_seq, 'last_hash', h.last_hash)
             FROM kvg.audit_head h),
    'entries', coalesce(jsonb_agg(jsonb_build_object(
        'row_encoding', a.row_encoding,
        'id', a.id,
        'seq', a.seq,
        'at', (extract(epoch FROM a.at) * 1000000)::bigint,
        'at_utc', to_char(a.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
        'role', a.role,
        'operation', a.operation,
        'model_fingerprint', a.model_fingerprint,
        'recipe', a.recipe,
        'input_sha256', a.input_sha256,
        'artifact_sha256', a.artifact_sha256,
        'output_sha256', a.output_sha256,
        'logits_sha256', a.logits_sha256,
        'tokens_in', a.tokens_in,
        'tokens_out', a.tokens_out,
        'tokens_grafted', a.tokens_grafted,
        'mode', a.mode,
        'knowledge_id', a.knowledge_id,
        'verified', a.verified,
        'output_text', a.output_text,
        'graft_us', a.graft_us,
        'prefill_us', a.prefill_us,
        'decode_us', a.decode_us,
        'kv_proven', a.kv_proven,
        'output_bytes', encode(a.output_bytes, 'hex'),
        'prev_hash', a.prev_hash,
        'row_hash', a.row_hash) ORDER BY a.seq), '[]'::jsonb))
  FROM kvg.audit a
  WHERE (kvg_manifest.from_seq IS NULL OR a.seq >= kvg_manifest.from_seq)
    AND (kvg_manifest.to_seq IS NULL OR a.seq <= kvg_manifest.to_seq)
$$;
COMMENT ON FUNCTION public.kvg_manifest(bigint, bigint) IS
  'Audit rows from_seq..to_seq with everything needed to re-check their hashes and outputs offline '
  '(scripts/kvg-manifest-check.py).';

-- Privileges ----------------------------------------------------------------------------

REVOKE ALL ON kvg.audit_pending, kvg.storage_usage FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION kvg.audit_insert(text, name, text, text, text, text, text, text, integer, integer,
                                            integer, text, bigint, boolean, text, bigint, bigint, bigint, boolean,
                                            bytea),
                           kvg.audit_first_bad(), kvg.function_pin(regprocedure), kvg.artifact_update_check(),
                           kvg.audit_move_pending(bigint, bigint, text), kvg.audit_link()
  FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION public.kvg_import(bytea, boolean), public.kvg_audit_verify(),
                           public.kvg_manifest(bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.kvg_import(bytea, boolean), public.kvg_audit_verify() TO kvg_user;
-- Manifests hold every role's rows: auditors only.
GRANT USAGE ON SCHEMA kvg TO kvg_auditor;
GRANT SELECT ON kvg.audit, kvg.audit_head TO kvg_auditor;
GRANT EXECUTE ON FUNCTION public.kvg_manifest(bigint, bigint), public.kvg_audit_verify(),
                          kvg.audit_row_hash(kvg.audit), kvg.audit_field(text) TO kvg_auditor;
GRANT SELECT ON kvg.storage_usage TO kvg_user;

-- Output bytes (docs/output-bytes.md) ---------------------------------------------------

-- A model emits bytes, which need not be UTF-8. Text results and
-- output_text hold them as valid text (U+FFFD for what is not UTF-8, and for
-- NUL); output_sha256 is the SHA-256 of the raw bytes, and output_bytes keeps
-- them when they differ from output_text's UTF-8 (NULL otherwise), so a
-- manifest re-hashes what the model really produced. output_bytes is part of
-- the kvg-audit-v3 row hash, after kv_proven (docs/audit-chain.md); the
-- column, kvg.audit_row_hash, kvg.audit_insert and kvg_manifest carry it above.

-- kvg_generate's output byte for byte (its SHA-256 is the audit row's output_sha256).
CREATE FUNCTION public.kvg_generate_bytes(prompt text, max_tokens integer DEFAULT 64, artifact text DEFAULT NULL,
                                       seed bigint DEFAULT NULL, temperature double precision DEFAULT 0)
RETURNS bytea
AS 'MODULE_PATHNAME', 'kvg_generate_bytes' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION public.kvg_generate_bytes(text, integer, text, bigint, double precision) IS
  'kvg_generate, returning the raw output bytes (which need not be UTF-8) instead of text.';
REVOKE EXECUTE ON FUNCTION public.kvg_generate_bytes(text, integer, text, bigint, double precision) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.kvg_generate_bytes(text, integer, text, bigint, double precision) TO kvg_user;

-- No orphaned large objects (docs/artifact-lifecycle.md) -------------------------------

-- Large objects cannot be extension members, so DROP EXTENSION kvg (or DROP
-- SCHEMA kvg CASCADE) would leave every artifact's object behind. This event
-- trigger fires before such a command (ddl_command_start: kvg.artifacts still
-- exists) and unlinks them in the same transaction, so a drop that fails or
-- rolls back keeps them. It has to fire before: an sql_drop trigger that is
-- itself a member of the extension is gone, with the artifacts table, by the
-- time sql_drop triggers run.
CREATE FUNCTION kvg.drop_guard() RETURNS event_trigger
AS 'MODULE_PATHNAME', 'kvg_drop_guard' LANGUAGE C;
CREATE EVENT TRIGGER kvg_drop_unlinks_artifacts ON ddl_command_start
  WHEN TAG IN ('DROP EXTENSION', 'DROP SCHEMA') EXECUTE FUNCTION kvg.drop_guard();

-- Both directions of orphan: a large object that looks like an artifact
-- (owned by kvg's owner, beginning with the magic "KVGA") without a
-- kvg.artifacts row, and a row whose large object is gone.
CREATE FUNCTION public.kvg_orphans()
RETURNS TABLE (kind text, loid oid, sha256 text, bytes bigint)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
  SELECT 'object_without_row', m.oid, NULL::text,
         (SELECT sum(length(p.data)) FROM pg_largeobject p WHERE p.loid = m.oid)::bigint
  FROM pg_largeobject_metadata m
  WHERE m.lomowner = (SELECT nspowner FROM pg_namespace WHERE nspname = 'kvg')
    AND NOT EXISTS (SELECT FROM kvg.artifacts a WHERE a.loid = m.oid)
    AND lo_get(m.oid, 0, 4) = '\x4b564741'::bytea
  UNION ALL
  SELECT 'row_without_object', a.loid, a.sha256, a.bytes
  FROM kvg.artifacts a
  WHERE NOT EXISTS (SELECT FROM pg_largeobject_metadata m WHERE m.oid = a.loid)
  ORDER BY 1, 2
$$;
COMMENT ON FUNCTION public.kvg_orphans() IS
  'Artifact large objects without a kvg.artifacts row, and rows without their large object (none: consistent).';

-- Unlinks the objects kvg_orphans() finds without a row (after a DROP
-- EXTENSION made before 0.2.0, a DROP OWNED, a restore into a database
-- that held some): returns how many. Rows without an object are reported,
-- never deleted: their content is gone, and deciding that is the owner's.
CREATE FUNCTION public.kvg_vacuum() RETURNS bigint
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
  SELECT count(lo_unlink(o.loid)) FROM public.kvg_orphans() o WHERE o.kind = 'object_without_row'
$$;
COMMENT ON FUNCTION public.kvg_vacuum() IS
  'Unlinks artifact large objects that no kvg.artifacts row names; returns how many.';
REVOKE EXECUTE ON FUNCTION public.kvg_orphans(), public.kvg_vacuum(), kvg.drop_guard() FROM PUBLIC;
