-- kvg 0.1.0: content-addressed KV-cache artifacts, an append-only hash-chained
-- audit trail, and the SQL entry points of the engine.
--
-- Everything lives in schema kvg (kvg.control: schema = kvg, relocatable =
-- false). Nothing is granted to PUBLIC; the role kvg_user may call the
-- functions and read the catalogs. Rows of kvg.artifacts and kvg.audit, and
-- the artifacts' large objects, are written by the C code with the rights of
-- the schema owner (extension/src/owner_rights.hpp), so no role needs INSERT
-- on them and no SECURITY DEFINER function is needed. SQL-language functions
-- pin search_path so a caller's search_path cannot redirect them.

\echo Use "CREATE EXTENSION kvg" to load this file. \quit

DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'kvg_user') THEN
    CREATE ROLE kvg_user NOLOGIN;
  END IF;
END
$$;

-- Artifacts ------------------------------------------------------------------

CREATE TABLE kvg.artifacts (
  sha256            text PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  loid              oid NOT NULL UNIQUE,
  bytes             bigint,
  n_tokens          integer,
  model_fingerprint text CHECK (model_fingerprint ~ '^[0-9a-f]{64}$'),
  recipe            text,
  -- Deferred so that pg_restore, which loads rows in physical order, may load
  -- a continuation before its parent within one COPY.
  parent_sha256     text REFERENCES kvg.artifacts DEFERRABLE INITIALLY DEFERRED,
  created_at        timestamptz NOT NULL DEFAULT now(),
  created_by        name NOT NULL DEFAULT current_user
);
CREATE INDEX ON kvg.artifacts (parent_sha256);
COMMENT ON TABLE kvg.artifacts IS
  'One row per stored artifact: its SHA-256 identity and the large object holding its bytes.';

-- Audit trail ------------------------------------------------------------------

CREATE TABLE kvg.audit (
  id                bigserial PRIMARY KEY,
  at                timestamptz NOT NULL,
  role              name NOT NULL,
  operation         text NOT NULL,
  model_fingerprint text,
  recipe            text,
  input_sha256      text,
  artifact_sha256   text,
  output_sha256     text,
  logits_sha256     text,
  tokens_in         integer,
  tokens_out        integer,
  prev_hash         text NOT NULL,
  row_hash          text NOT NULL
);
COMMENT ON TABLE kvg.audit IS
  'Append-only, hash-chained record of kvg calls; see docs/audit-chain.md.';

-- The chain's head: the serialisation point of appends (locked FOR UPDATE
-- and updated by every append, so concurrent appenders queue in READ
-- COMMITTED and get a serialization failure in REPEATABLE READ instead of
-- forking the chain) and the anchor that makes a deleted tail detectable.
-- Created by the first append, not here, so that pg_restore can load it.
CREATE TABLE kvg.audit_head (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  last_id   bigint,
  last_hash text NOT NULL
);

-- One field of the canonical encoding: "-" for NULL, otherwise the UTF-8
-- byte length, ":", and the value; each field ends with a newline.
CREATE FUNCTION kvg.audit_field(value text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN value IS NULL THEN '-'
              ELSE octet_length(convert_to(value, 'UTF8'))::text || ':' || value END || E'\n'
$$;

-- row_hash of an audit row (docs/audit-chain.md is the normative description).
CREATE FUNCTION kvg.audit_row_hash(a kvg.audit) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $$
  SELECT encode(sha256(convert_to(
           'kvg-audit-v1' || E'\n'
           || kvg.audit_field(a.id::text)
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
           || kvg.audit_field(a.prev_hash),
         'UTF8')), 'hex')
$$;

-- The only insert path (called by the C code's audit_append with the owner's
-- rights). Under the head row's lock it takes the next id, links the row to
-- the head's hash and moves the head.
CREATE FUNCTION kvg.audit_insert(operation text, role name, model_fingerprint text, recipe text,
                                 input_sha256 text, artifact_sha256 text, output_sha256 text,
                                 logits_sha256 text, tokens_in integer, tokens_out integer)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  head kvg.audit_head;
  r kvg.audit;
BEGIN
  INSERT INTO kvg.audit_head (last_id, last_hash) VALUES (NULL, repeat('0', 64))
    ON CONFLICT (singleton) DO NOTHING;
  SELECT * INTO STRICT head FROM kvg.audit_head FOR UPDATE;

  r.id := nextval('kvg.audit_id_seq');  -- under the lock: ids follow chain order
  r.at := clock_timestamp();
  r.role := audit_insert.role;
  r.operation := audit_insert.operation;
  r.model_fingerprint := audit_insert.model_fingerprint;
  r.recipe := audit_insert.recipe;
  r.input_sha256 := audit_insert.input_sha256;
  r.artifact_sha256 := audit_insert.artifact_sha256;
  r.output_sha256 := audit_insert.output_sha256;
  r.logits_sha256 := audit_insert.logits_sha256;
  r.tokens_in := audit_insert.tokens_in;
  r.tokens_out := audit_insert.tokens_out;
  r.prev_hash := head.last_hash;
  r.row_hash := kvg.audit_row_hash(r);

  INSERT INTO kvg.audit SELECT r.*;
  UPDATE kvg.audit_head SET last_id = r.id, last_hash = r.row_hash;
  RETURN r.id;
END
$$;

-- The id of the first row whose chain does not verify, or NULL when the whole
-- chain does. A row fails when its row_hash is not the hash of its fields or
-- its prev_hash is not the previous row's row_hash (64 zeros for the first).
-- If every row verifies but the head disagrees with the last row, the tail
-- was cut or extended outside audit_insert: the answer is then the head's
-- last_id when rows are missing after it, the first row after the head's
-- last_id when rows were added, or the first row when the head is missing.
CREATE FUNCTION public.kvg_audit_verify() RETURNS bigint
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
  WITH chain AS (
    SELECT a.id, a.prev_hash, a.row_hash, kvg.audit_row_hash(a) AS recomputed,
           lag(a.row_hash, 1, repeat('0', 64)) OVER (ORDER BY a.id) AS expected_prev
    FROM kvg.audit a
  ), last AS (
    SELECT id, row_hash FROM kvg.audit ORDER BY id DESC LIMIT 1
  ), tail AS (
    SELECT CASE
             WHEN h.singleton IS NULL THEN (SELECT min(id) FROM kvg.audit)
             WHEN l.id IS NULL THEN h.last_id
             WHEN h.last_id IS NULL OR h.last_id < l.id THEN
               (SELECT min(id) FROM kvg.audit WHERE id > coalesce(h.last_id, 0))
             WHEN h.last_id > l.id OR h.last_hash IS DISTINCT FROM l.row_hash THEN h.last_id
           END AS id
    FROM last l FULL JOIN kvg.audit_head h ON true
  )
  SELECT coalesce(
    (SELECT min(id) FROM chain
      WHERE row_hash IS DISTINCT FROM recomputed OR prev_hash IS DISTINCT FROM expected_prev),
    (SELECT id FROM tail))
$$;

-- Append-only tables ------------------------------------------------------------

-- Statement-level, so that even a statement touching no rows is refused. The
-- owner or a superuser can still disable the trigger; the hash chain is what
-- makes such tampering evident (kvg_audit_verify). TG_ARGV[0] is the hint.
CREATE FUNCTION kvg.refuse_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RAISE EXCEPTION 'rows of %.% are immutable: % is not allowed', TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_OP
    USING ERRCODE = 'insufficient_privilege', HINT = TG_ARGV[0];
END
$$;

CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON kvg.audit
  FOR EACH STATEMENT EXECUTE FUNCTION kvg.refuse_change(
    'The audit trail is append-only; record a correction as a new row.');

-- An artifact row states a fact about content-addressed bytes; it can be
-- deleted (with its large object, below) but never changed.
CREATE TRIGGER artifacts_immutable BEFORE UPDATE ON kvg.artifacts
  FOR EACH STATEMENT EXECUTE FUNCTION kvg.refuse_change(
    'An artifact is identified by its bytes; store changed bytes as a new artifact.');

-- Large objects cannot be extension members and nothing else points at them,
-- so a deleted artifact row takes its object along.
CREATE FUNCTION kvg.artifact_unlink() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  PERFORM lo_unlink(OLD.loid);
  RETURN OLD;
END
$$;

CREATE TRIGGER artifacts_unlink AFTER DELETE ON kvg.artifacts
  FOR EACH ROW EXECUTE FUNCTION kvg.artifact_unlink();

-- pg_dump saves the rows of these tables (large objects are dumped anyway
-- and keep their OIDs on restore, so loid stays valid).
SELECT pg_catalog.pg_extension_config_dump('kvg.artifacts', '');
SELECT pg_catalog.pg_extension_config_dump('kvg.audit', '');
SELECT pg_catalog.pg_extension_config_dump('kvg.audit_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('kvg.audit_head', '');

-- Artifact functions (no engine) --------------------------------------------------

CREATE FUNCTION public.kvg_import(data bytea) RETURNS text
AS 'MODULE_PATHNAME', 'kvg_import' LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION public.kvg_import(bytea) IS
  'Validates an artifact (header, trailer, identity), stores it once and returns its SHA-256.';

CREATE FUNCTION public.kvg_export(sha256 text) RETURNS bytea
AS 'MODULE_PATHNAME', 'kvg_export' LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION public.kvg_export(text) IS 'The stored bytes of an artifact, hash-checked.';

CREATE FUNCTION public.kvg_artifact_verify(sha256 text) RETURNS boolean
AS 'MODULE_PATHNAME', 'kvg_artifact_verify' LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION public.kvg_artifact_verify(text) IS
  'Re-reads and re-checks a stored artifact: false (with a NOTICE) when it is damaged.';

-- Engine functions ----------------------------------------------------------------
-- They load the model kvg.model names (once per backend), and each inference
-- call appends one row to kvg.audit in the caller's transaction.

CREATE FUNCTION public.kvg_capture(prefix text, parent text DEFAULT NULL) RETURNS text
AS 'MODULE_PATHNAME', 'kvg_capture' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION public.kvg_capture(text, text) IS
  'Computes the KV cache of prefix (continuing parent''s chain when given), stores it as an artifact, returns its SHA-256.';

CREATE FUNCTION public.kvg_generate(prompt text, max_tokens integer DEFAULT 64, artifact text DEFAULT NULL,
                                 seed bigint DEFAULT NULL, temperature double precision DEFAULT 0)
RETURNS text
AS 'MODULE_PATHNAME', 'kvg_generate' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION public.kvg_generate(text, integer, text, bigint, double precision) IS
  'Generates up to max_tokens tokens after prompt (which continues the artifact''s text when one is given); '
  'temperature 0 is greedy, seed NULL means 0.';

CREATE FUNCTION public.kvg_graft_check(artifact text, continuation text, samples integer DEFAULT 1)
RETURNS TABLE (graft_logits_sha256 text, recompute_logits_sha256 text, kl_max double precision,
               argmax_agreement double precision, exact boolean)
AS 'MODULE_PATHNAME', 'kvg_graft_check' LANGUAGE C STRICT VOLATILE ROWS 1;
COMMENT ON FUNCTION public.kvg_graft_check(text, text, integer) IS
  'Grafts the artifact and evaluates continuation, recomputes the whole prompt in one pass, and compares the logits.';

CREATE FUNCTION public.kvg_model_info() RETURNS jsonb
AS 'MODULE_PATHNAME', 'kvg_model_info' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION public.kvg_model_info() IS 'The model kvg.model names and how this backend runs it.';

-- Privileges --------------------------------------------------------------------

REVOKE ALL ON ALL TABLES IN SCHEMA kvg FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA kvg FROM PUBLIC;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA kvg FROM PUBLIC;
-- The user-facing kvg_* functions live in schema public, so that they are
-- callable as kvg_*(...) right after CREATE EXTENSION with the default
-- search_path; the extension's tables and helpers stay in schema kvg.
REVOKE EXECUTE ON FUNCTION
  public.kvg_capture(text, text),
  public.kvg_generate(text, integer, text, bigint, double precision),
  public.kvg_graft_check(text, text, integer),
  public.kvg_model_info(),
  public.kvg_import(bytea),
  public.kvg_export(text),
  public.kvg_artifact_verify(text),
  public.kvg_audit_verify()
FROM PUBLIC;

GRANT USAGE ON SCHEMA kvg TO kvg_user;
GRANT SELECT ON kvg.artifacts, kvg.audit, kvg.audit_head TO kvg_user;
GRANT EXECUTE ON FUNCTION
  public.kvg_capture(text, text),
  public.kvg_generate(text, integer, text, bigint, double precision),
  public.kvg_graft_check(text, text, integer),
  public.kvg_model_info(),
  public.kvg_import(bytea),
  public.kvg_export(text),
  public.kvg_artifact_verify(text),
  public.kvg_audit_verify(),
  kvg.audit_row_hash(kvg.audit),
  kvg.audit_field(text)
TO kvg_user;
