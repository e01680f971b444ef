-- kvg 1.0.0: content-addressed KV-cache artifacts, a verified-knowledge
-- library answered by grafting them, an append-only hash-chained audit trail,
-- and the SQL entry points of the engine.
--
-- This file is the whole schema of version 1.0.0: CREATE EXTENSION kvg runs it
-- and nothing else. A schema change after a release goes into an upgrade
-- script kvg--<from>--<to>.sql together with the next full install script
-- kvg--<to>.sql, and tests/upgrade/upgrade_equals_fresh.sh proves that both
-- paths give the same catalog (docs/operations.md, "Upgrading").
--
-- Where things live: the tables and helpers in schema kvg (kvg.control:
-- schema = kvg, relocatable = false); the user-facing kvg_* functions in
-- schema public, so that they are callable by their names right after
-- CREATE EXTENSION with the default search_path.
--
-- Who may do what (the last section): nothing is granted to PUBLIC. kvg_user
-- calls the functions and reads the catalogs; kvg_author is a kvg_user who
-- may also deposit entries checked by SQL functions; kvg_auditor reads every
-- audit row and produces manifests; kvg_audit_writer is what a hot standby
-- connects as to append its audit rows here; kvg_verifier is the role
-- function verifiers run as, in a worker of their own (granted nothing, and a
-- verifier fails closed while anyone grants it anything; docs/security.md);
-- schema kvg_frozen holds the frozen copies of function verifiers, made at
-- deposit, and no one else's objects. Rows of kvg.artifacts, kvg.audit
-- and kvg.knowledge, and the artifacts' large objects, are written by the C
-- code with the rights of the schema owner (extension/src/roles/owner_rights.hpp),
-- so no role needs INSERT on them and no SECURITY DEFINER function is needed.
-- SQL-language functions pin search_path so that a caller's search_path
-- cannot redirect them (docs/security.md), or have an SQL-standard body
-- (RETURN), which is parsed here, where only pg_catalog and kvg are searched.

--
-- COST, in the planner's units of cpu_operator_cost (0.0025 of a page
-- read): a call that runs the model is a forward pass over its prompt and a
-- decode, tens of milliseconds and more, so 1,000,000 (kvg_learn 2,000,000,
-- kvg_solve 3,000,000: several attempts); one that reads an artifact's bytes
-- 100,000; tokenizing and model facts 10,000. The planner then evaluates
-- every cheaper condition of a WHERE clause before calling one.

\echo Use "CREATE EXTENSION kvg" to load this file. \quit

-- Preloaded ---------------------------------------------------------------------------------
-- kvg is loaded at server start (shared_preload_libraries = 'kvg'): its
-- settings exist from the first statement and its audit writer is a
-- background worker with shared memory. Without it the install stops here,
-- naming the line to add.
CREATE FUNCTION kvg.require_preload() RETURNS void
AS 'MODULE_PATHNAME', 'kvg_require_preload' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION kvg.require_preload() IS
  'Internal: refuses to go on unless kvg is in shared_preload_libraries (CREATE EXTENSION calls it).';
SELECT kvg.require_preload();

-- Roles ---------------------------------------------------------------------------------
-- Roles are cluster-wide, so a second database with kvg reuses them.

DO $$
DECLARE
  r text;
BEGIN
  FOREACH r IN ARRAY ARRAY['kvg_user', 'kvg_author', 'kvg_auditor', 'kvg_audit_writer', 'kvg_verifier'] LOOP
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = r) THEN
      EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', r);
    END IF;
  END LOOP;
END
$$;
GRANT kvg_user TO kvg_author;

-- Frozen verifiers ------------------------------------------------------------------------
-- A function verifier, and every function it reaches, is copied here at
-- deposit (extension/src/workers/verifier/verifier_freeze.cpp); answers run
-- the copy. Only the extension's owner may create or change anything here.
CREATE SCHEMA kvg_frozen;
REVOKE ALL ON SCHEMA kvg_frozen FROM PUBLIC;
COMMENT ON SCHEMA kvg_frozen IS
  'Frozen copies of function verifiers, made at deposit: what answers run (docs/security.md, promise 8).';

-- Immutable rows ------------------------------------------------------------------------

-- Refuses a change to a table whose rows state facts. Statement-level where
-- it is used, so that even a statement touching no rows is refused. The owner
-- or a superuser can still disable the trigger; the audit's hash chain is
-- what makes such tampering evident (kvg_audit_verify). TG_ARGV[0] is the hint.
CREATE FUNCTION kvg.refuse_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RAISE EXCEPTION 'rows of %.% are immutable: % is not allowed', TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_OP
    USING ERRCODE = 'insufficient_privilege', HINT = TG_ARGV[0];
END
$$;
COMMENT ON FUNCTION kvg.refuse_change() IS 'Trigger: refuses any change to rows that state facts (the hint is its argument).';

-- Artifacts (docs/artifact-format.md, docs/artifact-lifecycle.md) -------------------------

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
  -- SHA-256 of this artifact's own token ids (u32 little-endian, as
  -- chain_tokens_sha256 in docs/artifact-format.md, but of its own tokens
  -- only): with parent_sha256 the key of a chain link, so that automatic
  -- prefix reuse finds stored chains without reading any large object.
  tokens_sha256     text CHECK (tokens_sha256 ~ '^[0-9a-f]{64}$'),
  created_at        timestamptz NOT NULL DEFAULT now(),
  created_by        name NOT NULL DEFAULT current_user,
  -- How the KV came to be (docs/security.md):
  --   computed    prefilled by this server's engine over a chain it trusts
  --   verified    imported, then recomputed here from its tokens: the same bytes
  --   unverified  imported without recomputation (kvg_import(..., verify => false))
  --   derived     computed here, but continuing a chain that holds an
  --               unverified link, so its KV is only as good as that link's
  -- Only computed and verified KV is grafted without being asked for.
  provenance        text NOT NULL DEFAULT 'computed'
                      CHECK (provenance IN ('computed', 'verified', 'unverified', 'derived'))
);
-- Serves both the prefix-reuse walk (children of a parent with given tokens;
-- roots are parent_sha256 IS NULL) and the parent foreign key's checks.
CREATE INDEX ON kvg.artifacts (parent_sha256, tokens_sha256);
COMMENT ON TABLE kvg.artifacts IS
  'One row per stored artifact: its SHA-256 identity and the large object holding its bytes.';
COMMENT ON COLUMN kvg.artifacts.provenance IS
  'How the KV came to be: computed | verified (imported and recomputed) | unverified (imported) | derived (computed over an unverified chain).';

-- An artifact row states a fact about content-addressed bytes: nothing in it
-- changes, except that an unverified or derived artifact may be proven later
-- (a verified re-import recomputes it). Row-level, because that exception
-- depends on the row.
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
COMMENT ON FUNCTION kvg.artifact_update_check() IS
  'Trigger: an artifact row never changes, except an unverified or derived one proven later.';
CREATE TRIGGER artifacts_immutable BEFORE UPDATE ON kvg.artifacts
  FOR EACH ROW EXECUTE FUNCTION kvg.artifact_update_check();

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
COMMENT ON FUNCTION kvg.artifact_unlink() IS 'Trigger: a deleted artifact row takes its large object along.';
CREATE TRIGGER artifacts_unlink AFTER DELETE ON kvg.artifacts
  FOR EACH ROW EXECUTE FUNCTION kvg.artifact_unlink();

-- Storing an artifact (docs/audit-chain.md, "Artifacts") ---------------------------------
-- Only the audit writer, a background worker of kvg connected as a
-- superuser, calls this (nobody else may execute it), each time in a
-- transaction of its own that commits before the storing call goes on: no
-- call waits on another's open transaction that stored the same bytes. The
-- large object is given to kvg's owner, as all artifacts' are; its parameters are built by kvg's C code from what the call
-- computed (the caller names neither the role nor the provenance; payer and
-- quota are the call's session user and its kvg.storage_quota, charged by
-- kvg.storage_charge before anything is stored; by_writer is false only
-- where a call stores in its own transaction). Returns
-- 1 when it stored the bytes, 0 when they were stored already (then a
-- trusted provenance upgrades an untrusted row, as a verified re-import
-- proves it).
CREATE FUNCTION kvg.artifact_store(id text, content bytea, tokens integer, fingerprint text, recipe_name text,
                                   parent text, token_hash text, creator name, origin text,
                                   payer name, quota bigint, by_writer boolean) RETURNS bigint
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
-- An owner's open transaction that deleted these bytes' row would make the
-- writer wait on it: bounded, so that the writer goes on with other work.
SET lock_timeout = '5s'
AS $$
DECLARE
  object oid;
BEGIN
  IF encode(sha256(content), 'hex') IS DISTINCT FROM id THEN
    RAISE EXCEPTION 'kvg.artifact_store: the bytes do not hash to %', id USING ERRCODE = 'data_corrupted';
  END IF;
  -- COLLATE "default": called with name arguments, this function's text
  -- parameters are "C", which the primary key's index does not serve.
  IF parent IS NOT NULL AND NOT EXISTS (SELECT FROM kvg.artifacts a WHERE a.sha256 = parent COLLATE "default") THEN
    RAISE EXCEPTION 'parent artifact % is not stored; store the parent before its continuation', parent
      USING ERRCODE = 'undefined_object';
  END IF;
  -- Before any large object is made: the session user pays (53400 past its quota).
  PERFORM kvg.storage_charge(payer, id, length(content), quota, by_writer);
  IF NOT EXISTS (SELECT FROM kvg.artifacts a WHERE a.sha256 = id COLLATE "default") THEN
    object := lo_from_bytea(0, content);
    EXECUTE format('ALTER LARGE OBJECT %s OWNER TO %s', object,
                   (SELECT n.nspowner::regrole FROM pg_namespace n WHERE n.nspname = 'kvg'));
    INSERT INTO kvg.artifacts AS a (sha256, loid, bytes, n_tokens, model_fingerprint, recipe, parent_sha256,
                                    tokens_sha256, created_by, provenance)
    VALUES (id, object, length(content), tokens, fingerprint, recipe_name, parent, token_hash, creator, origin)
    ON CONFLICT (sha256) DO NOTHING;
    IF FOUND THEN
      RETURN 1;
    END IF;
    PERFORM lo_unlink(object);
  END IF;
  IF origin IN ('computed', 'verified') THEN
    UPDATE kvg.artifacts a SET provenance = origin
    WHERE a.sha256 = id COLLATE "default" AND a.provenance IN ('unverified', 'derived');
  END IF;
  RETURN 0;
END
$$;
COMMENT ON FUNCTION kvg.artifact_store(text, bytea, integer, text, text, text, text, name, text, name, bigint, boolean) IS
  'The audit writer''s way of storing an artifact, in a transaction of its own (docs/audit-chain.md).';

-- Which transactions stored an artifact: each storing call inserts a row in
-- its own transaction, which commits or rolls back with it. An artifact
-- that no committed claim and nothing else references (kvg_orphans,
-- 'unreferenced_artifact') was stored for calls that rolled back, and
-- kvg_vacuum collects it. Insert-only, without a key: two calls claiming
-- the same artifact never wait on each other. No foreign key: a REPEATABLE
-- READ caller's snapshot may predate the artifact row it claims.
CREATE TABLE kvg.artifact_claims (
  id          bigserial PRIMARY KEY,
  sha256      text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  claimed_by  name NOT NULL,
  claimed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ON kvg.artifact_claims (sha256);
COMMENT ON TABLE kvg.artifact_claims IS
  'One row per committed call that stored an artifact; kvg_vacuum collects artifacts that nothing claims or references.';

-- kvg.knowledge.artifact_sha256 names an artifact, checked as a foreign key
-- would be, but under the latest committed state: the artifact of a
-- REPEATABLE READ or SERIALIZABLE learn was committed by the audit writer
-- after the learner's snapshot was taken, where a foreign key's check would
-- not find it. The row is locked FOR KEY SHARE until the learner commits,
-- and deleting an artifact that an entry names is refused (23503).
-- Deferred, like the foreign keys, so that pg_restore may load either table
-- first.
CREATE FUNCTION kvg.knowledge_artifact_check() RETURNS trigger
AS 'MODULE_PATHNAME', 'kvg_knowledge_artifact_check' LANGUAGE C;
COMMENT ON FUNCTION kvg.knowledge_artifact_check() IS
  'Constraint trigger: a library entry''s artifact is stored (kvg.knowledge.artifact_sha256).';
CREATE FUNCTION kvg.artifact_entry_check() RETURNS trigger
AS 'MODULE_PATHNAME', 'kvg_artifact_entry_check' LANGUAGE C;
COMMENT ON FUNCTION kvg.artifact_entry_check() IS
  'Constraint trigger: an artifact that a library entry names is not deleted.';

-- One storage quota (docs/security.md) -------------------------------------------------------
-- Every artifact stored on a role's behalf (captures, imports, learns,
-- solves, answers' chain links) is charged to the session user of the call
-- that stored it: SET ROLE opens no new bucket. A role pays an artifact's
-- bytes once, the first time one of its calls stores it, whoever stored the
-- same bytes before: stored once, the content belongs to every role that
-- stored it, and each pays for it, so that no role's usage depends on what
-- others stored. The charge lasts while the artifact is stored: deleting it
-- (kvg_vacuum, kvg_artifact_delete, DELETE) releases its charges.
CREATE TABLE kvg.storage_charges (
  role       name NOT NULL,
  sha256     text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  bytes      bigint NOT NULL CHECK (bytes >= 0),
  charged_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (role, sha256)
);
CREATE INDEX ON kvg.storage_charges (sha256);
COMMENT ON TABLE kvg.storage_charges IS
  'One row per role and artifact it stored: what kvg.storage_quota bounds (kvg.storage_usage sums it).';

-- Each role's charges summed, so that a store costs the same however many
-- artifacts the role has: `bytes` is written by the audit writer alone (so
-- it never waits on a caller's transaction for the row), and what other
-- transactions change (a deleted artifact releases its charges; a call that
-- stores in its own transaction, docs/audit-chain.md step 3) they append to
-- kvg.storage_adjustments, which the writer folds in. A role's usage is its
-- account's bytes plus its adjustments: the sum of its charges.
CREATE TABLE kvg.storage_accounts (
  role  name PRIMARY KEY,
  bytes bigint NOT NULL
);
COMMENT ON TABLE kvg.storage_accounts IS
  'Each role''s charges summed, as the audit writer last folded them (plus kvg.storage_adjustments).';
CREATE TABLE kvg.storage_adjustments (
  role  name NOT NULL,
  bytes bigint NOT NULL
);
CREATE INDEX ON kvg.storage_adjustments (role);
COMMENT ON TABLE kvg.storage_adjustments IS
  'Changes to roles'' charges made outside the audit writer, insert-only, until the writer folds them in.';

-- Charges `size` bytes of artifact `id` to `payer`, or refuses (53400) when
-- its usage would exceed `quota`: nothing is charged twice, so storing what
-- the role has stored already costs nothing and is never refused. Called by
-- kvg.artifact_store, before any large object is made. Race-free: every
-- charge is made by the database's one artifacts writer (`by_writer`), one
-- transaction at a time, so the usage it reads includes every charge before
-- it; the one exception, a call that stores in its own transaction, checks
-- without that order and can overshoot by its one artifact. It never waits
-- on a caller: a release that an open transaction has not committed is not
-- folded in yet (its charge still counts).
CREATE FUNCTION kvg.storage_charge(payer name, id text, size bigint, quota bigint, by_writer boolean) RETURNS void
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  used bigint;
BEGIN
  IF payer IS NULL OR quota IS NULL OR by_writer IS NULL THEN
    RAISE EXCEPTION 'kvg.storage_charge: no role or quota to charge' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  -- Collations spelled out: called with a name argument, this function's
  -- text parameters are "C", and no index of "default" text would serve.
  IF EXISTS (SELECT FROM kvg.storage_charges c WHERE c.role = payer COLLATE "C" AND c.sha256 = id COLLATE "default") THEN
    RETURN;
  END IF;
  IF by_writer THEN
    WITH folded AS (DELETE FROM kvg.storage_adjustments j WHERE j.role = payer COLLATE "C" RETURNING j.bytes)
    INSERT INTO kvg.storage_accounts AS s (role, bytes) SELECT payer, coalesce(sum(f.bytes), 0) FROM folded f
    ON CONFLICT (role) DO UPDATE SET bytes = s.bytes + excluded.bytes
    RETURNING s.bytes INTO used;
  ELSE
    SELECT coalesce((SELECT s.bytes FROM kvg.storage_accounts s WHERE s.role = payer COLLATE "C"), 0)
           + coalesce((SELECT sum(j.bytes) FROM kvg.storage_adjustments j WHERE j.role = payer COLLATE "C"), 0)
      INTO used;
  END IF;
  IF used + size > quota THEN
    RAISE EXCEPTION 'storing % bytes would exceed the kvg.storage_quota of role % (% bytes, % used)',
      size, payer, quota, used
      USING ERRCODE = 'configuration_limit_exceeded',
            HINT = 'kvg.storage_usage shows what each role has stored; a superuser can raise the quota with '
                   'ALTER ROLE ... SET kvg.storage_quota.';
  END IF;
  INSERT INTO kvg.storage_charges (role, sha256, bytes) VALUES (payer, id, size) ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN
    RETURN;
  ELSIF by_writer THEN
    UPDATE kvg.storage_accounts s SET bytes = s.bytes + size WHERE s.role = payer COLLATE "C";
  ELSE
    INSERT INTO kvg.storage_adjustments (role, bytes) VALUES (payer, size);
  END IF;
END
$$;
COMMENT ON FUNCTION kvg.storage_charge(name, text, bigint, bigint, boolean) IS
  'Charges an artifact to the session user that stored it, refusing (53400) what would exceed its quota.';

-- Releases every charge of the given artifacts (deleted, or no longer
-- stored): appended as adjustments, so that no deleting transaction holds
-- a row the audit writer needs.
CREATE FUNCTION kvg.storage_release(artifacts text[]) RETURNS void
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
  WITH released AS (DELETE FROM kvg.storage_charges c WHERE c.sha256 = ANY (artifacts COLLATE "default")
                    RETURNING c.role, c.bytes)
  INSERT INTO kvg.storage_adjustments (role, bytes) SELECT r.role, -sum(r.bytes) FROM released r GROUP BY r.role
$$;
COMMENT ON FUNCTION kvg.storage_release(text[]) IS 'Releases every role''s charges of the given artifacts.';
CREATE FUNCTION kvg.storage_uncharge() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  PERFORM kvg.storage_release(ARRAY(SELECT g.sha256 FROM gone g));
  RETURN NULL;
END
$$;
COMMENT ON FUNCTION kvg.storage_uncharge() IS 'Trigger: deleted artifacts are charged to nobody.';
CREATE TRIGGER artifacts_uncharge AFTER DELETE ON kvg.artifacts
  REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION kvg.storage_uncharge();

-- What each role has stored: what kvg.storage_quota bounds.
-- A role sees its own usage (its session user's: what it is charged);
-- auditors, the schema's owner and superusers see every role's. What others
-- store, even its size or how many they are, is theirs (docs/security.md):
-- so the rows come out of a function in C, whose plan no reader's EXPLAIN
-- shows (extension/src/functions/reader_views.cpp).
CREATE FUNCTION kvg.storage_usage_rows(OUT role name, OUT artifacts bigint, OUT bytes bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'kvg_storage_usage_rows' LANGUAGE C STABLE;
COMMENT ON FUNCTION kvg.storage_usage_rows() IS
  'Artifacts and bytes charged to each role the caller may see (view kvg.storage_usage).';
CREATE VIEW kvg.storage_usage AS SELECT * FROM kvg.storage_usage_rows();
COMMENT ON VIEW kvg.storage_usage IS
  'Artifacts and bytes charged to each role: what kvg.storage_quota bounds (a user sees its own row).';

-- Audit trail (docs/audit-chain.md) ----------------------------------------------------------
-- An audited call hands its row to the audit writer of its database, a
-- background worker, which inserts and links it in a transaction of its own
-- (the rows of concurrent calls in one commit) before the call returns its
-- answer. So an answer that reaches a client always has a committed row, and
-- no caller's transaction ever holds the chain's head.

CREATE TABLE kvg.audit (
  -- id and seq are given by the audit writer as it links the row: seq is
  -- 1, 2, ... in chain order.
  id                bigserial PRIMARY KEY,
  seq               bigint NOT NULL UNIQUE,
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
  -- How much of the prompt came from stored artifacts, how a question was
  -- routed (docs/flywheel.md; 'positional': docs/composition.md), the
  -- library entry used and whether its verifier accepted the answer.
  tokens_grafted    integer,
  mode              text CHECK (mode IN ('recurring', 'transfer', 'cold', 'positional')),
  knowledge_id      bigint,
  verified          boolean,
  -- Every KV the call grafted or stored is known to be what this engine
  -- computes for its tokens (false: an unverified artifact was grafted on
  -- request, an import was not recomputed, or blocks were composed).
  kv_proven         boolean,
  -- The output, so that a manifest can be re-checked without the database:
  -- output_text as valid text (U+FFFD for what is not UTF-8, and for NUL);
  -- output_bytes the raw bytes when they are not exactly output_text's UTF-8,
  -- NULL otherwise; output_sha256 is always the SHA-256 of the raw bytes
  -- (docs/output-bytes.md).
  output_text       text,
  output_bytes      bytea,
  -- Where the time went, in microseconds.
  graft_us          bigint,
  prefill_us        bigint,
  decode_us         bigint,
  -- Who called, from which transaction: caller_xid is the calling
  -- (sub)transaction, so pg_xact_status tells an answer a committed
  -- transaction used from one whose caller rolled back (NULL for a hot
  -- standby's forwarded rows); session_role is session_user, role the
  -- current_user of the call.
  caller_xid        xid8,
  session_role      name,
  -- What the output depends on beyond the inputs above, so that an auditor
  -- can recompute it (kvg reproduce): how it was decoded (NULL where nothing
  -- was), the SHA-256 of the laid-out prompt's token ids (int32
  -- little-endian), of the knowledge template that laid out a flywheel
  -- prompt, and the artifacts grafted, root first, comma-separated.
  temperature       double precision,
  top_p             double precision,
  seed              bigint,
  max_tokens        integer,
  stop_reason       text,
  prompt_tokens_sha256 text,
  template_sha256   text,
  artifact_chain    text,
  -- The canonical encoding row_hash is computed with (kvg.audit_row_hash).
  -- Named in each row so that a later encoding can coexist with this one.
  row_encoding      text NOT NULL DEFAULT 'kvg-audit-v4' CHECK (row_encoding = 'kvg-audit-v4'),
  prev_hash         text NOT NULL,
  row_hash          text NOT NULL
);
COMMENT ON TABLE kvg.audit IS
  'Append-only, hash-chained record of kvg calls; see docs/audit-chain.md.';

CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON kvg.audit
  FOR EACH STATEMENT EXECUTE FUNCTION kvg.refuse_change(
    'The audit trail is append-only; record a correction as a new row.');

-- Who sees what: a kvg_user the rows of its own calls (role = its current
-- user), kvg_auditor every row; the owner (who writes them) and superusers
-- every row. A user reads them through kvg.readable_audit, not the table: a
-- row-level policy would hide other users' rows but not their number (an
-- EXPLAIN ANALYZE of `artifact_sha256 = guess` would count the rows the
-- policy removed), so its rows come out of a function in C
-- (extension/src/functions/reader_views.cpp), as kvg.readable_artifacts'.
-- The policy is defense in depth: a role granted SELECT by mistake reads
-- nothing.
ALTER TABLE kvg.audit ENABLE ROW LEVEL SECURITY;
CREATE POLICY audit_auditor_all ON kvg.audit FOR SELECT TO kvg_auditor USING (true);
CREATE FUNCTION kvg.readable_audit_rows() RETURNS SETOF kvg.audit
AS 'MODULE_PATHNAME', 'kvg_readable_audit_rows' LANGUAGE C STABLE;
COMMENT ON FUNCTION kvg.readable_audit_rows() IS
  'The audit rows the caller may read: those of its own calls (all, for auditors; view kvg.readable_audit).';
CREATE VIEW kvg.readable_audit AS SELECT * FROM kvg.readable_audit_rows();
COMMENT ON VIEW kvg.readable_audit IS
  'The audit rows a caller reads: those of its own calls; all of them for kvg_auditor.';

-- The chain's head: the anchor that makes a deleted tail detectable, and
-- what the audit writer locks as it links. Created by the first link, not here, so that
-- pg_restore can load it.
CREATE TABLE kvg.audit_head (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  last_id   bigint,
  last_seq  bigint,
  last_hash text NOT NULL
);

-- The knowledge templates answers were laid out from, by the SHA-256 their
-- audit rows name (template_sha256): recorded with the row, in the audit
-- writer's transaction, so an auditor rebuilds the prompt of any answer
-- whatever kvg.knowledge_template says later (docs/audit-chain.md,
-- "Reproducing a row"). Facts, like the rows that name them: never changed.
CREATE TABLE kvg.knowledge_templates (
  sha256     text PRIMARY KEY CHECK (sha256 = encode(sha256(convert_to(template, 'UTF8')), 'hex')),
  template   text NOT NULL,
  first_used timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE kvg.knowledge_templates IS
  'Every knowledge template an audited answer was laid out from, by its SHA-256 (kvg.audit.template_sha256).';
CREATE TRIGGER knowledge_templates_immutable BEFORE UPDATE OR DELETE OR TRUNCATE ON kvg.knowledge_templates
  FOR EACH STATEMENT EXECUTE FUNCTION kvg.refuse_change(
    'Audit rows name these templates by their hash; they are kept as long as the rows.');

-- One field of the canonical encoding: "-" for NULL, otherwise the UTF-8
-- byte length, ":", and the value; each field ends with a newline.
-- Both are SQL-standard bodies (RETURN), parsed here, where only pg_catalog
-- and kvg are searched, and with no SET clause, so that a verification
-- inlines them: as functions called per field, re-planned for every row,
-- they made kvg_audit_verify cost 500 us a row (85 s for 190,000 rows).
CREATE FUNCTION kvg.audit_field(value text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
RETURN CASE WHEN value IS NULL THEN '-'
            ELSE octet_length(convert_to(value, 'UTF8'))::text || ':' || value END || E'\n';
COMMENT ON FUNCTION kvg.audit_field(text) IS 'One field of the audit row encoding: "-" or length:value, and a newline.';

-- row_hash of an audit row: SHA-256 of the encoding's name and the fields in
-- this order (docs/audit-chain.md is the normative description;
-- scripts/kvg-manifest-check.py recomputes it offline). temperature and
-- top_p as numeric text: the same digits whatever extra_float_digits is.
CREATE FUNCTION kvg.audit_row_hash(a kvg.audit) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
RETURN encode(sha256(convert_to(
           a.row_encoding || E'\n'
           || kvg.audit_field(a.id::text)
           || kvg.audit_field(a.seq::text)
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
           || kvg.audit_field(CASE WHEN a.kv_proven THEN 'true' WHEN NOT a.kv_proven THEN 'false' END)
           || kvg.audit_field(encode(a.output_bytes, 'hex'))
           || kvg.audit_field(a.caller_xid::text)
           || kvg.audit_field(a.session_role::text)
           || kvg.audit_field(a.temperature::numeric::text)
           || kvg.audit_field(a.top_p::numeric::text)
           || kvg.audit_field(a.seed::text)
           || kvg.audit_field(a.max_tokens::text)
           || kvg.audit_field(a.stop_reason)
           || kvg.audit_field(a.prompt_tokens_sha256)
           || kvg.audit_field(a.template_sha256)
           || kvg.audit_field(a.artifact_chain)
           || kvg.audit_field(a.prev_hash),
         'UTF8')), 'hex');
COMMENT ON FUNCTION kvg.audit_row_hash(kvg.audit) IS 'The row_hash of an audit row (docs/audit-chain.md).';

-- Inserts one row and links it as the chain's next; returns its id. The
-- audit writer (extension/src/workers/writer/writer.cpp) calls it for every row, in
-- its own READ COMMITTED transaction, many rows per commit: the lock on the
-- head's row (readers are not blocked) is held from here to that commit by
-- the writer alone, never in a caller's transaction.
CREATE FUNCTION kvg.audit_insert(operation text, role name, model_fingerprint text, recipe text,
                                 input_sha256 text, artifact_sha256 text, output_sha256 text,
                                 logits_sha256 text, tokens_in integer, tokens_out integer,
                                 tokens_grafted integer DEFAULT NULL, mode text DEFAULT NULL,
                                 knowledge_id bigint DEFAULT NULL, verified boolean DEFAULT NULL,
                                 output_text text DEFAULT NULL, graft_us bigint DEFAULT NULL,
                                 prefill_us bigint DEFAULT NULL, decode_us bigint DEFAULT NULL,
                                 kv_proven boolean DEFAULT NULL, output_bytes bytea DEFAULT NULL,
                                 caller_xid xid8 DEFAULT NULL, session_role name DEFAULT NULL,
                                 temperature double precision DEFAULT NULL, top_p double precision DEFAULT NULL,
                                 seed bigint DEFAULT NULL, max_tokens integer DEFAULT NULL,
                                 stop_reason text DEFAULT NULL, prompt_tokens_sha256 text DEFAULT NULL,
                                 template_sha256 text DEFAULT NULL, artifact_chain text DEFAULT NULL,
                                 template_text text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  r kvg.audit;
  head record;
  -- Where this session last left the head: the version its last append
  -- wrote, kept in a placeholder setting ('kvg_audit.head_at'). Read only
  -- when it has the form this function writes (a database's owner can set
  -- it for the writer's sessions, ALTER DATABASE ... SET): then at worst it
  -- points where the head is not, and the head is found by its key.
  hint_text text := current_setting('kvg_audit.head_at', true);
  hint tid := CASE WHEN hint_text ~ '^\((0|[1-9][0-9]{0,8}),[1-9][0-9]{0,3}\)$' THEN hint_text::tid END;
  moved_to tid;
BEGIN
  -- The template's text is not part of the row: kept beside it, by its hash.
  IF audit_insert.template_text IS NOT NULL THEN
    IF encode(sha256(convert_to(audit_insert.template_text, 'UTF8')), 'hex')
       IS DISTINCT FROM audit_insert.template_sha256 THEN
      RAISE EXCEPTION 'template_text is not the text of template_sha256' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO kvg.knowledge_templates (sha256, template)
    VALUES (audit_insert.template_sha256, audit_insert.template_text) ON CONFLICT DO NOTHING;
  END IF;
  -- Appends are serialized on the head's row, locked until the writer
  -- commits. A row lock, not a table lock: autovacuum skips a table it cannot
  -- lock at once, and under a busy writer it never cleaned the head's dead
  -- versions, one per row appended, so each link read a longer table.
  -- While any snapshot is older than the last few appends (a long call, a
  -- pg_dump, a batch of rows in one transaction) none of those versions can
  -- be pruned, and finding the live one among them, by a scan or by the key,
  -- visits every one: each append slower than the last. So the writer's
  -- session goes straight to the version it wrote last (a TID scan: one
  -- tuple); the table's only visible row, so nothing else can be found
  -- there. When that version is not the head any more (another session
  -- appended, the head was replaced) it is invisible, and the head is found
  -- by its key.
  IF hint IS NOT NULL THEN
    SELECT h.last_seq, h.last_hash, h.ctid AS at INTO head FROM kvg.audit_head h WHERE h.ctid = hint FOR UPDATE;
  END IF;
  IF hint IS NULL OR NOT FOUND THEN
    SELECT h.last_seq, h.last_hash, h.ctid AS at INTO head FROM kvg.audit_head h WHERE h.singleton FOR UPDATE;
  END IF;
  -- No head: the first row ever, or a deleted head; the table lock makes the
  -- new head the only one. Continuing after the last seq from 64 zeros keeps
  -- a deleted head evident (kvg_audit_verify).
  IF NOT FOUND THEN
    LOCK TABLE kvg.audit_head IN EXCLUSIVE MODE;
    SELECT h.last_seq, h.last_hash, h.ctid AS at INTO head FROM kvg.audit_head h WHERE h.singleton FOR UPDATE;
    IF NOT FOUND THEN
      INSERT INTO kvg.audit_head (last_id, last_seq, last_hash)
      VALUES (NULL, (SELECT max(a.seq) FROM kvg.audit a), repeat('0', 64))
      RETURNING last_seq, last_hash, ctid AS at INTO head;
    END IF;
  END IF;
  r.id := nextval('kvg.audit_id_seq');
  r.seq := coalesce(head.last_seq, 0) + 1;
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
  r.tokens_grafted := audit_insert.tokens_grafted;
  r.mode := audit_insert.mode;
  r.knowledge_id := audit_insert.knowledge_id;
  r.verified := audit_insert.verified;
  r.output_text := audit_insert.output_text;
  r.graft_us := audit_insert.graft_us;
  r.prefill_us := audit_insert.prefill_us;
  r.decode_us := audit_insert.decode_us;
  r.kv_proven := audit_insert.kv_proven;
  r.output_bytes := audit_insert.output_bytes;
  r.caller_xid := audit_insert.caller_xid;
  r.session_role := audit_insert.session_role;
  r.temperature := audit_insert.temperature;
  r.top_p := audit_insert.top_p;
  r.seed := audit_insert.seed;
  r.max_tokens := audit_insert.max_tokens;
  r.stop_reason := audit_insert.stop_reason;
  r.prompt_tokens_sha256 := audit_insert.prompt_tokens_sha256;
  r.template_sha256 := audit_insert.template_sha256;
  r.artifact_chain := audit_insert.artifact_chain;
  r.row_encoding := 'kvg-audit-v4';
  r.prev_hash := head.last_hash;
  r.row_hash := kvg.audit_row_hash(r);
  INSERT INTO kvg.audit SELECT r.*;
  -- The version locked above, by its ctid: no search either.
  UPDATE kvg.audit_head SET last_id = r.id, last_seq = r.seq, last_hash = r.row_hash WHERE ctid = head.at
  RETURNING ctid INTO moved_to;
  -- Transactional like the update: rolled back with it.
  PERFORM set_config('kvg_audit.head_at', moved_to::text, false);
  RETURN r.id;
END
$$;
COMMENT ON FUNCTION kvg.audit_insert(text, name, text, text, text, text, text, text, integer, integer, integer, text,
                                     bigint, boolean, text, bigint, bigint, bigint, boolean, bytea, xid8, name,
                                     double precision, double precision, bigint, integer, text, text, text, text,
                                     text) IS
  'Internal: inserts an audit row and links it into the chain (the audit writer''s transaction), records its '
  'knowledge template''s text; returns its id.';

-- The first chain position that does not verify, its row's id and why; no
-- row when the whole chain verifies. A row fails when its seq is not its
-- position, its row_hash is not the hash of its fields, or its prev_hash is
-- not the previous row's row_hash (64 zeros for the first).
-- From a checkpoint (after_seq > 0): only the rows after it are read, the
-- first of them must link to after_hash, and the row at after_seq must still
-- carry that row_hash; what lies before it was verified when the checkpoint
-- was taken (and a full verification, after_seq = 0, reads it all again). If every row
-- verifies but the head disagrees with the last row, the tail was cut or
-- extended outside the writer: the answer is then the head's last row when
-- rows are missing after it, the first row after it when rows were added, or
-- the first row when the head is missing.
CREATE FUNCTION kvg.audit_first_bad(after_seq bigint DEFAULT 0, after_hash text DEFAULT repeat('0', 64),
                                     OUT seq bigint, OUT id bigint, OUT reason text) RETURNS SETOF record
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp ROWS 1
AS $$
  WITH chain AS (
    SELECT a.id, a.seq, a.prev_hash, a.row_hash, kvg.audit_row_hash(a) AS recomputed,
           lag(a.row_hash, 1, audit_first_bad.after_hash) OVER (ORDER BY a.seq) AS expected_prev,
           row_number() OVER (ORDER BY a.seq) + audit_first_bad.after_seq AS position
    FROM kvg.audit a
    WHERE a.seq > audit_first_bad.after_seq
  ), checkpoint AS (
    SELECT audit_first_bad.after_seq AS seq, a.id,
           'the checkpoint''s row is gone or no longer carries the row_hash recorded for it' AS reason
    FROM (SELECT 1) one LEFT JOIN kvg.audit a ON a.seq = audit_first_bad.after_seq
    WHERE audit_first_bad.after_seq > 0 AND a.row_hash IS DISTINCT FROM audit_first_bad.after_hash
  ), bad AS (
    SELECT c.seq, c.id,
           CASE WHEN c.seq IS DISTINCT FROM c.position
                  THEN format('a row is missing before this one (seq %s at chain position %s)', c.seq, c.position)
                WHEN c.row_hash IS DISTINCT FROM c.recomputed
                  THEN 'its row_hash is not the hash of its fields (the row was changed)'
                ELSE 'its prev_hash is not the row_hash of the row before it' END AS reason
    FROM chain c
    WHERE c.row_hash IS DISTINCT FROM c.recomputed OR c.prev_hash IS DISTINCT FROM c.expected_prev
       OR c.seq IS DISTINCT FROM c.position
    ORDER BY c.seq LIMIT 1
  ), last AS (
    SELECT a.id, a.seq, a.row_hash FROM kvg.audit a ORDER BY a.seq DESC LIMIT 1
  ), tail AS (
    -- One case analysis of the head against the last row, in this order:
    -- no head; rows cut off after the head; rows added behind its back; a
    -- head that names another hash.
    SELECT CASE WHEN h.singleton IS NULL THEN 1
                WHEN l.id IS NULL OR h.last_seq > l.seq THEN 2
                WHEN h.last_seq IS NULL OR h.last_seq < l.seq THEN 3
                WHEN h.last_hash IS DISTINCT FROM l.row_hash THEN 4 END AS kind,
           h.last_seq, h.last_id
    FROM last l FULL JOIN kvg.audit_head h ON true
  ), tail_row AS (
    SELECT CASE t.kind WHEN 1 THEN (SELECT a.seq FROM kvg.audit a ORDER BY a.seq LIMIT 1)
                       WHEN 3 THEN coalesce(t.last_seq, 0) + 1
                       ELSE t.last_seq END AS seq,
           CASE t.kind WHEN 1 THEN (SELECT a.id FROM kvg.audit a ORDER BY a.seq LIMIT 1)
                       WHEN 3 THEN (SELECT a.id FROM kvg.audit a WHERE a.seq > coalesce(t.last_seq, 0)
                                    ORDER BY a.seq LIMIT 1)
                       ELSE t.last_id END AS id,
           CASE t.kind WHEN 1 THEN 'the chain''s head (kvg.audit_head) is missing'
                       WHEN 2 THEN 'the rows up to the head''s last_seq are gone (cut off)'
                       WHEN 3 THEN 'rows follow the head without having moved it'
                       WHEN 4 THEN 'the head''s last_hash is not the last row''s row_hash' END AS reason
    FROM tail t
  )
  SELECT p.seq, p.id, p.reason
  FROM (SELECT 0 AS k, c.seq, c.id, c.reason FROM checkpoint c
        UNION ALL SELECT 1, b.seq, b.id, b.reason FROM bad b
        UNION ALL SELECT 2, t.seq, t.id, t.reason FROM tail_row t WHERE t.reason IS NOT NULL) p
  ORDER BY p.k LIMIT 1
$$;
COMMENT ON FUNCTION kvg.audit_first_bad(bigint, text) IS
  'Internal: the first audit chain position that does not verify (seq, id) and why; no row when it verifies.';

-- Every caller verifies the whole chain, whatever rows it may read: the C
-- function runs kvg.audit_first_bad with the owner's rights. The shape of
-- every verify function (docs/sql.md): ok, the first bad thing, and why; a
-- composite value rather than a set, so that (kvg_audit_verify()).ok can
-- stand in an expression or a WHERE clause.
-- From a checkpoint (after_seq, after_hash: a row and its row_hash recorded
-- where the caller trusts them, e.g. the head a manifest check printed), only
-- the rows after it are read: O(new rows).
CREATE FUNCTION public.kvg_audit_verify(after_seq bigint DEFAULT NULL, after_hash text DEFAULT NULL,
                                        OUT ok boolean, OUT first_bad bigint, OUT reason text) RETURNS record
AS 'MODULE_PATHNAME', 'kvg_audit_verify' LANGUAGE C VOLATILE COST 1000000;
COMMENT ON FUNCTION public.kvg_audit_verify(bigint, text) IS
  'Verifies the hash-chained audit trail, whole or after a checkpoint (after_seq, after_hash): ok, or the seq of '
  'the first row that does not verify (first_bad) and why (reason).';

-- The audit writers at work: one row per database and lane whose writer runs.
CREATE FUNCTION public.kvg_audit_writers(OUT database oid, OUT pid integer, OUT state text,
                                         OUT rows_written bigint, OUT commits bigint, OUT lane text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'kvg_audit_writers' LANGUAGE C VOLATILE ROWS 4;
COMMENT ON FUNCTION public.kvg_audit_writers() IS
  'The audit writers of each database (background workers; lane rows or artifacts): pid, state, rows written, commits.';

-- The engine worker (kvg.engine = worker): the one process that runs every
-- session's generations in shared batched passes. One row while kvg is
-- preloaded: its pid (null while none runs), how many times it has started,
-- the model it last loaded, sequences running and waiting for room, the most
-- sequences one pass carried, the KV its sequences reserve, and its passes,
-- rows (sequence parts carried), generations served and failed, and its
-- verified-artifact cache (kvg.engine_cache_memory), and how many times it
-- has copied a model's weights to the GPU.
CREATE FUNCTION public.kvg_engine_worker(OUT pid integer, OUT starts bigint, OUT model text, OUT sequences integer,
                                         OUT queued integer, OUT batch_peak integer, OUT kv_bytes bigint,
                                         OUT passes bigint, OUT rows_carried bigint, OUT served bigint,
                                         OUT failed bigint, OUT cache_entries bigint, OUT cache_bytes bigint,
                                         OUT cache_hits bigint, OUT cache_misses bigint,
                                         OUT gpu_weight_uploads bigint, OUT stats_reset timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'kvg_engine_worker' LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION public.kvg_engine_worker() IS
  'The engine worker (kvg.engine = worker): pid, starts, model, running and waiting sequences, batch peak, KV, passes.';
CREATE VIEW kvg.engine_worker AS SELECT * FROM public.kvg_engine_worker();
COMMENT ON VIEW kvg.engine_worker IS 'The engine worker at work (kvg_engine_worker()).';

-- Each backend's generation in progress, in the manner of
-- pg_stat_progress_*: its phase (queued for the engine worker, prefill,
-- decode) and how far. Another role's figures are NULL unless the caller has
-- pg_read_all_stats or kvg_auditor (extension/src/calls/call_progress.cpp).
CREATE FUNCTION public.kvg_progress(OUT pid integer, OUT datid oid, OUT phase text, OUT prompt_tokens bigint,
                                    OUT prompt_tokens_done bigint, OUT max_tokens bigint, OUT tokens_decoded bigint,
                                    OUT started timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'kvg_progress' LANGUAGE C VOLATILE ROWS 10;
COMMENT ON FUNCTION public.kvg_progress() IS
  'Each backend''s generation in progress: pid, database, phase (queued, prefill, decode), tokens done of each.';
CREATE VIEW kvg.progress AS
  SELECT p.pid, p.datid, d.datname, p.phase, p.prompt_tokens, p.prompt_tokens_done, p.max_tokens,
         p.tokens_decoded, p.started
  FROM public.kvg_progress() p LEFT JOIN pg_catalog.pg_database d ON d.oid = p.datid;
COMMENT ON VIEW kvg.progress IS 'Generations in progress, one row per backend (kvg_progress()).';

-- Its cumulative figures (passes, rows, served, failed, cache hits and
-- misses, GPU uploads) count from now on, and its batch peak from its next
-- pass; stats_reset says when. The owner's, as pg_stat_reset() is.
CREATE FUNCTION public.kvg_engine_worker_reset() RETURNS timestamptz
AS 'MODULE_PATHNAME', 'kvg_engine_worker_reset' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION public.kvg_engine_worker_reset() IS
  'Resets the engine worker''s cumulative figures (kvg_engine_worker(), stats_reset); returns when.';

-- Scale-out (docs/scale-out.md): hot standbys answer from the replicated
-- library and artifacts; their audit rows are appended here, on the primary,
-- in its one hash chain. A standby connects with kvg.audit_conninfo as a
-- member of kvg_audit_writer and calls this function, which may do nothing
-- else: it reads no audit rows and can write only through it.
-- The row is one jsonb object whose fields are kvg.audit_insert's
-- parameters by name, each a string or null (kvg.audit_columns()): the
-- standby's calling and session roles, every reproduction field, no
-- caller_xid (the standby's transaction means nothing here). It is
-- committed by the audit writer like a local call's row before this
-- returns, so that the standby learns the row's id, seq and row_hash.
-- Refuses rows of what only a primary does (import, capture, learn,
-- solve), unknown fields, an output_sha256 that does not cover the output,
-- and running on a standby.
CREATE FUNCTION kvg.audit_append_forwarded("row" jsonb)
RETURNS TABLE (id bigint, seq bigint, row_hash text)
AS 'MODULE_PATHNAME', 'kvg_audit_append_forwarded' LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION kvg.audit_append_forwarded(jsonb) IS
  'Appends the audit row of a call a hot standby answered; for kvg_audit_writer (docs/scale-out.md).';

-- The columns of an audit row as the extension's C++ knows them (its one
-- table, extension/src/audit/audit_row.cpp), in kvg.audit_insert's order: the
-- writer's insert and the forwarded row are made from it, and
-- tests/pgtap/18_audit_columns.sql checks it against kvg.audit_insert.
CREATE FUNCTION kvg.audit_columns(OUT "position" integer, OUT name text, OUT sql_type text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'kvg_audit_columns' LANGUAGE C IMMUTABLE STRICT;
COMMENT ON FUNCTION kvg.audit_columns() IS
  'The audit row''s columns as the extension''s C++ writes them, in kvg.audit_insert''s order.';

-- One audit row as a manifest entry: every field of its row hash, the output
-- among them, so that a third party can re-check each hash, the links and
-- the outputs, and re-score answers, without kvg or the database
-- (scripts/kvg-manifest-check.py). An SQL-standard body: parsed once, when
-- the extension is created, so no caller's search_path or objects reach it.
CREATE FUNCTION kvg.manifest_entry(a kvg.audit) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
RETURN pg_catalog.jsonb_build_object(
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
    'caller_xid', a.caller_xid::text,
    'session_role', a.session_role,
    'temperature', a.temperature::numeric::text,
    'top_p', a.top_p::numeric::text,
    'seed', a.seed,
    'max_tokens', a.max_tokens,
    'stop_reason', a.stop_reason,
    'prompt_tokens_sha256', a.prompt_tokens_sha256,
    'template_sha256', a.template_sha256,
    'artifact_chain', a.artifact_chain,
    'prev_hash', a.prev_hash,
    'row_hash', a.row_hash);
COMMENT ON FUNCTION kvg.manifest_entry(kvg.audit) IS
  'One audit row as a manifest entry (kvg_manifest, kvg_manifest_lines).';

-- The chain's head as manifests name it.
CREATE FUNCTION kvg.manifest_head() RETURNS jsonb
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
  SELECT jsonb_build_object('last_id', h.last_id, 'last_seq', h.last_seq, 'last_hash', h.last_hash)
  FROM kvg.audit_head h
$$;
COMMENT ON FUNCTION kvg.manifest_head() IS 'The audit chain''s head as a manifest names it.';

-- Audit rows from_seq..to_seq (either bound open when NULL), as one JSON
-- document: for a bounded range (a jsonb value holds at most 256 MB; a
-- chain of 190,000 rows does not fit). kvg_manifest_lines streams any range.
CREATE FUNCTION public.kvg_manifest(from_seq bigint DEFAULT NULL, to_seq bigint DEFAULT NULL) RETURNS jsonb
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
  SELECT jsonb_build_object(
    'format', 'kvg-manifest-v2',
    'from_seq', kvg_manifest.from_seq,
    'to_seq', kvg_manifest.to_seq,
    'head', kvg.manifest_head(),
    'entries', coalesce(jsonb_agg(kvg.manifest_entry(a) ORDER BY a.seq), '[]'::jsonb))
  FROM kvg.audit a
  WHERE (kvg_manifest.from_seq IS NULL OR a.seq >= kvg_manifest.from_seq)
    AND (kvg_manifest.to_seq IS NULL OR a.seq <= kvg_manifest.to_seq)
$$;
COMMENT ON FUNCTION public.kvg_manifest(bigint, bigint) IS
  'Audit rows from_seq..to_seq with everything needed to re-check their hashes and outputs offline '
  '(scripts/kvg-manifest-check.py), as one JSON document.';

-- The same rows as JSON Lines: a header line (format, bounds, head), then
-- one line per row in chain order. Rows go out as they are read (psql with
-- FETCH_COUNT, COPY, a cursor): no value holds the whole manifest, so a
-- chain of any length exports, and scripts/kvg-manifest-check.py reads it
-- one line at a time.
CREATE FUNCTION public.kvg_manifest_lines(from_seq bigint DEFAULT NULL, to_seq bigint DEFAULT NULL)
RETURNS SETOF text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp ROWS 100000
AS $$
  SELECT l.line FROM (
    SELECT 0 AS k, 0::bigint AS seq,
           jsonb_build_object('format', 'kvg-manifest-lines-v1', 'from_seq', kvg_manifest_lines.from_seq,
                              'to_seq', kvg_manifest_lines.to_seq, 'head', kvg.manifest_head())::text AS line
    UNION ALL
    SELECT 1, a.seq, kvg.manifest_entry(a)::text
    FROM kvg.audit a
    WHERE (kvg_manifest_lines.from_seq IS NULL OR a.seq >= kvg_manifest_lines.from_seq)
      AND (kvg_manifest_lines.to_seq IS NULL OR a.seq <= kvg_manifest_lines.to_seq)
  ) l
  ORDER BY l.k, l.seq
$$;
COMMENT ON FUNCTION public.kvg_manifest_lines(bigint, bigint) IS
  'kvg_manifest as JSON Lines: a header line, then one line per audit row; for chains of any length.';

-- Artifact functions (no model needed except to verify an import) -----------------------

CREATE FUNCTION public.kvg_import(data bytea, verify boolean DEFAULT true) RETURNS text
AS 'MODULE_PATHNAME', 'kvg_import' LANGUAGE C STRICT VOLATILE COST 1000000;
COMMENT ON FUNCTION public.kvg_import(bytea, boolean) IS
  'Validates an artifact, recomputes its KV with kvg.model and refuses it unless the bytes are equal (verify), '
  'stores it once and returns its SHA-256. verify => false stores it unverified: never grafted unless asked for.';

CREATE FUNCTION public.kvg_export(artifact text) RETURNS bytea
AS 'MODULE_PATHNAME', 'kvg_export' LANGUAGE C STRICT VOLATILE COST 100000;
COMMENT ON FUNCTION public.kvg_export(text) IS 'The stored bytes of an artifact, hash-checked.';

CREATE FUNCTION public.kvg_artifact_verify(artifact text, OUT ok boolean, OUT first_bad text, OUT reason text)
RETURNS record
AS 'MODULE_PATHNAME', 'kvg_artifact_verify' LANGUAGE C STRICT VOLATILE COST 100000;
COMMENT ON FUNCTION public.kvg_artifact_verify(text) IS
  'Re-reads and re-checks a stored artifact: ok, or the artifact (first_bad) and why it is damaged (reason).';

-- Each backend keeps the bytes of artifacts it has read and hashed in full
-- (up to kvg.artifact_cache_memory, a superuser setting; 0: off), so that a
-- recurring graft copies them instead of reading and hashing them again
-- (docs/artifact-lifecycle.md). Statistics are views (docs/sql.md); this
-- one reads the calling backend's state, as pg_stat_statements' view reads
-- shared memory through a function.
CREATE FUNCTION kvg.artifact_cache_stats()
RETURNS TABLE (entries bigint, bytes bigint, capacity bigint, hits bigint, misses bigint, evictions bigint)
AS 'MODULE_PATHNAME', 'kvg_artifact_cache_stats' LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION kvg.artifact_cache_stats() IS 'The calling backend''s verified-artifact cache (view kvg.artifact_cache).';
CREATE VIEW kvg.artifact_cache AS SELECT * FROM kvg.artifact_cache_stats();
COMMENT ON VIEW kvg.artifact_cache IS
  'This backend''s verified-artifact cache: entries, bytes, capacity (kvg.artifact_cache_memory), and hits, misses '
  'and evictions since the backend started.';

-- Engine functions --------------------------------------------------------------------------
-- They load the model kvg.model names (once per backend), and each inference
-- call appends one row to kvg.audit.

CREATE FUNCTION public.kvg_capture(prefix text, artifact text DEFAULT NULL) RETURNS text
AS 'MODULE_PATHNAME', 'kvg_capture' LANGUAGE C VOLATILE COST 1000000;
COMMENT ON FUNCTION public.kvg_capture(text, text) IS
  'Computes the KV cache of prefix (continuing the artifact''s chain when one is given), stores it as an artifact, '
  'returns its SHA-256.';

CREATE FUNCTION public.kvg_generate(prompt text, max_tokens integer DEFAULT 32, artifact text DEFAULT NULL,
                                    seed bigint DEFAULT NULL, temperature double precision DEFAULT 0)
RETURNS text
AS 'MODULE_PATHNAME', 'kvg_generate' LANGUAGE C VOLATILE COST 1000000;
COMMENT ON FUNCTION public.kvg_generate(text, integer, text, bigint, double precision) IS
  'Generates up to max_tokens tokens after prompt (which continues the artifact''s text when one is given); '
  'temperature 0 is greedy, seed NULL means 0.';

-- A model emits bytes, which need not be UTF-8; kvg_generate returns them as
-- valid text (docs/output-bytes.md), this returns them as they are (their
-- SHA-256 is the audit row's output_sha256).
CREATE FUNCTION public.kvg_generate_bytes(prompt text, max_tokens integer DEFAULT 32, artifact text DEFAULT NULL,
                                          seed bigint DEFAULT NULL, temperature double precision DEFAULT 0)
RETURNS bytea
AS 'MODULE_PATHNAME', 'kvg_generate_bytes' LANGUAGE C VOLATILE COST 1000000;
COMMENT ON FUNCTION public.kvg_generate_bytes(text, integer, text, bigint, double precision) IS
  'kvg_generate, returning the raw output bytes (which need not be UTF-8) instead of text.';

CREATE FUNCTION public.kvg_graft_check(artifact text, continuation text, samples integer DEFAULT 1)
RETURNS TABLE (graft_logits_sha256 text, recompute_logits_sha256 text, kl_max double precision,
               argmax_agreement double precision, exact boolean)
AS 'MODULE_PATHNAME', 'kvg_graft_check' LANGUAGE C STRICT VOLATILE ROWS 1 COST 1000000;
COMMENT ON FUNCTION public.kvg_graft_check(text, text, integer) IS
  'Grafts the artifact and evaluates continuation, recomputes the whole prompt in one pass, and compares the logits.';

-- Text or tokens (docs/sql.md): a prompt or continuation may be given as
-- token ids instead of text, so that what follows an artifact is exactly the
-- tokens meant (text after an artifact is tokenized on its own, which need
-- not give the tokens of the whole text tokenized at once). The same C
-- functions take either; kvg_tokenize shows a text's tokens.
CREATE FUNCTION public.kvg_capture(prefix integer[], artifact text DEFAULT NULL) RETURNS text
AS 'MODULE_PATHNAME', 'kvg_capture' LANGUAGE C VOLATILE COST 1000000;
COMMENT ON FUNCTION public.kvg_capture(integer[], text) IS
  'kvg_capture with the prefix as token ids, taken as they are (after the artifact''s tokens when one is given).';
CREATE FUNCTION public.kvg_generate(prompt integer[], max_tokens integer DEFAULT 32, artifact text DEFAULT NULL,
                                    seed bigint DEFAULT NULL, temperature double precision DEFAULT 0)
RETURNS text
AS 'MODULE_PATHNAME', 'kvg_generate' LANGUAGE C VOLATILE COST 1000000;
COMMENT ON FUNCTION public.kvg_generate(integer[], integer, text, bigint, double precision) IS
  'kvg_generate with the prompt as token ids, taken as they are (after the artifact''s tokens when one is given).';
CREATE FUNCTION public.kvg_generate_bytes(prompt integer[], max_tokens integer DEFAULT 32, artifact text DEFAULT NULL,
                                          seed bigint DEFAULT NULL, temperature double precision DEFAULT 0)
RETURNS bytea
AS 'MODULE_PATHNAME', 'kvg_generate_bytes' LANGUAGE C VOLATILE COST 1000000;
COMMENT ON FUNCTION public.kvg_generate_bytes(integer[], integer, text, bigint, double precision) IS
  'kvg_generate_bytes with the prompt as token ids.';
CREATE FUNCTION public.kvg_graft_check(artifact text, continuation integer[], samples integer DEFAULT 1)
RETURNS TABLE (graft_logits_sha256 text, recompute_logits_sha256 text, kl_max double precision,
               argmax_agreement double precision, exact boolean)
AS 'MODULE_PATHNAME', 'kvg_graft_check' LANGUAGE C STRICT VOLATILE ROWS 1 COST 1000000;
COMMENT ON FUNCTION public.kvg_graft_check(text, integer[], integer) IS
  'kvg_graft_check with the continuation as token ids, taken as they are after the artifact''s tokens.';
CREATE FUNCTION public.kvg_tokenize(text text, artifact text DEFAULT NULL) RETURNS integer[]
AS 'MODULE_PATHNAME', 'kvg_tokenize' LANGUAGE C VOLATILE COST 10000;
COMMENT ON FUNCTION public.kvg_tokenize(text, text) IS
  'The token ids a call would use for text: with BOS when nothing precedes it, or only the new tokens after the '
  'artifact''s chain. Not audited.';

CREATE FUNCTION public.kvg_model_info() RETURNS jsonb
AS 'MODULE_PATHNAME', 'kvg_model_info' LANGUAGE C VOLATILE COST 10000;
COMMENT ON FUNCTION public.kvg_model_info() IS 'The model kvg.model names and how this backend runs it.';

-- A conversation answered as the model's assistant, laid out in the chat
-- format of the model's tokenizer.chat_template (docs/chat.md). The audit row
-- has operation 'chat' and input_sha256 of the laid-out prompt text.
CREATE FUNCTION public.kvg_chat(messages jsonb, max_tokens integer DEFAULT 32, format text DEFAULT 'auto',
                                seed bigint DEFAULT NULL, temperature double precision DEFAULT 0)
RETURNS text
AS 'MODULE_PATHNAME', 'kvg_chat' LANGUAGE C VOLATILE COST 1000000;
COMMENT ON FUNCTION public.kvg_chat(jsonb, integer, text, bigint, double precision) IS
  'The assistant''s answer to messages ([{"role": "system|user|assistant", "content": "..."}, ...], the last the '
  'user''s), laid out in the model''s chat format (format: auto, plain, chatml, llama3, gemma, phi3, mistral); '
  'stops at the end of its turn; temperature 0 is greedy, seed NULL means 0.';

-- What kvg_chat asks the model, without running it.
CREATE FUNCTION public.kvg_chat_prompt(messages jsonb, format text DEFAULT 'auto')
RETURNS TABLE (format text, prompt text, tokens integer[])
AS 'MODULE_PATHNAME', 'kvg_chat_prompt' LANGUAGE C VOLATILE COST 10000 ROWS 4;
COMMENT ON FUNCTION public.kvg_chat_prompt(jsonb, text) IS
  'The chat format, laid-out prompt text and prompt tokens kvg_chat would use for messages (no model run, no audit row).';

-- The multi-block context of docs/composition.md: artifacts captured on
-- their own, placed one after another without recomputation. Cheap and NOT exact:
-- the result says exact = false; the audit row has mode 'positional' and
-- kv_proven = false. Refused (0A000) while kvg.require_exact is on.
CREATE FUNCTION public.kvg_generate_positional(artifacts text[], prompt text, max_tokens integer DEFAULT 32)
RETURNS TABLE (output text, exact boolean, tokens_composed integer, tokens_prefilled integer,
               tokens_decoded integer, compose_ms double precision, decode_ms double precision, audit_id bigint)
AS 'MODULE_PATHNAME', 'kvg_generate_positional' LANGUAGE C VOLATILE ROWS 1 COST 1000000;
COMMENT ON FUNCTION public.kvg_generate_positional(text[], text, integer) IS
  'Places the artifacts (chains from position 0) one after another, re-rotating their keys, evaluates '
  'prompt after them and decodes greedily: cheap, NOT exact (exact is always false).';

-- The verified-knowledge library (docs/flywheel.md) --------------------------------------------

-- The question key's normal form: ASCII letters lower-cased, every run of
-- ASCII whitespace one space, and spaces and ASCII punctuation stripped from
-- both ends. ASCII only, so that a key never depends on the database's
-- locale or collation; other characters are kept as they are.
CREATE FUNCTION kvg.normalize_question(question text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $$
  SELECT regexp_replace(
           regexp_replace(translate(question, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'),
                          '[\x09-\x0d ]+', ' ', 'g'),
           '^[\x09-\x0d\x20-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e]+|[\x09-\x0d\x20-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e]+$',
           '', 'g')
$$;
COMMENT ON FUNCTION kvg.normalize_question(text) IS
  'The question key''s normal form: ASCII lower case, whitespace runs one space, punctuation trimmed from the ends.';

-- SHA-256 (lowercase hex) of the normal form's UTF-8 bytes.
CREATE FUNCTION kvg.question_key(question text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $$
  SELECT encode(sha256(convert_to(kvg.normalize_question(question), 'UTF8')), 'hex')
$$;
COMMENT ON FUNCTION kvg.question_key(text) IS 'SHA-256 of a question''s normal form: the library''s key.';

-- The words of an answer, as the verifiers compare them: ASCII letters
-- lower-cased, every other ASCII character that is not a digit a separator,
-- words joined by one space. ("Red!" and "red" are the same answer.)
CREATE FUNCTION kvg.answer_words(answer text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $$
  SELECT btrim(regexp_replace(translate(answer, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'),
                              '[\x01-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]+', ' ', 'g'), ' ')
$$;
COMMENT ON FUNCTION kvg.answer_words(text) IS 'An answer''s words as the verifiers compare them.';

-- Whether `candidate` passes a built-in verifier, in the canonical form
-- kvg_learn stores:
--   contains          the words of `reference` occur, in order and adjacent,
--                     among the words of `candidate`
--   exact:<text>      the candidate's words are the words of <text>
--   regex:<pattern>   the candidate matches <pattern> (a PostgreSQL regular expression)
-- Function verifiers ("schema"."name") run in a background worker as
-- kvg_verifier (extension/src/workers/verifier/verifier_worker.hpp), never through here.
CREATE FUNCTION kvg.verify(verifier text, question text, candidate text, reference text) RETURNS boolean
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
COMMENT ON FUNCTION kvg.verify(text, text, text, text) IS
  'Whether candidate passes a built-in verifier (contains, exact:, regex:).';

-- What a function verifier reaches, what it is pinned to, and what of it is
-- frozen (docs/security.md, promise 8). The closure over pg_depend from the
-- function: forward, every object a thing depends on (the functions,
-- operators, types, casts, tables and views an atomic SQL body names:
-- PostgreSQL records them for LANGUAGE sql functions with a BEGIN ATOMIC or
-- RETURN body); and, from a table, view or type, what is attached to it and
-- changes what reading or writing it does (view rules, triggers, row security
-- policies, column defaults, constraints, indexes, domain checks).
CREATE FUNCTION kvg.verifier_closure(fn regprocedure, OUT classid oid, OUT objid oid)
RETURNS SETOF record
LANGUAGE sql STABLE STRICT SET search_path = pg_catalog, pg_temp
AS $$
  WITH RECURSIVE reach(classid, objid) AS (
    SELECT 'pg_proc'::regclass::oid, fn::oid
    UNION
    SELECT e.classid, e.objid
    FROM reach r
    CROSS JOIN LATERAL (
      SELECT d.refclassid, d.refobjid FROM pg_depend d
      WHERE d.classid = r.classid AND d.objid = r.objid
        AND d.refclassid <> 'pg_extension'::regclass  -- membership: what a thing does is its own definition
      UNION ALL
      SELECT d.classid, d.objid FROM pg_depend d
      WHERE r.classid IN ('pg_class'::regclass, 'pg_type'::regclass)
        AND d.refclassid = r.classid AND d.refobjid = r.objid AND d.deptype IN ('a', 'i')
        AND d.classid IN ('pg_rewrite'::regclass, 'pg_trigger'::regclass, 'pg_policy'::regclass,
                          'pg_attrdef'::regclass, 'pg_constraint'::regclass, 'pg_class'::regclass)
    ) e(classid, objid)
  )
  SELECT classid, objid FROM reach
$$;
COMMENT ON FUNCTION kvg.verifier_closure(regprocedure) IS
  'Every object a function verifier reaches: the closure over pg_depend (kvg.verifier_reach says what each is).';

-- Whether a function is built in: in pg_catalog and owned by the bootstrap
-- superuser (an extension's functions, dblink's included, are not).
CREATE FUNCTION kvg.builtin_function(fn oid) RETURNS boolean
LANGUAGE sql STABLE STRICT SET search_path = pg_catalog, pg_temp
RETURN EXISTS (SELECT FROM pg_proc p WHERE p.oid = fn AND p.proowner = 10
                                       AND p.pronamespace = 'pg_catalog'::regnamespace);
COMMENT ON FUNCTION kvg.builtin_function(oid) IS
  'Whether a function is built in (in pg_catalog, owned by the bootstrap superuser): a verifier may call it.';

-- Each object of the closure with its canonical definition, printed under
-- the fixed settings below (SET on the function), so that no session's
-- settings change it; and whether a verifier may reach it. A verifier is a
-- pure function of question and answer, frozen at deposit (kvg.verifier_copies):
-- `allowed` holds for a built-in object (created by initdb: its OID is below
-- 16384), the schemas that hold functions, and an atomic SQL function (BEGIN
-- ATOMIC or RETURN body: its calls are bound by OID) that is neither
-- SECURITY DEFINER nor SET anything; not for a relation (a verifier reads no
-- table: rows are data that its depositor could change), nor any other
-- object of a user's (an operator, type, cast, text-search configuration or
-- dictionary, aggregate: its definition could change after the freeze), nor
-- where a built-in is called that runs SQL text it is given (query_to_xml
-- and kin, ts_stat, ts_rewrite), reads a relation chosen at run time
-- (table_, schema_, database_to_xml and kin), or looks up a name at run time
-- (to_regclass and kin, a cast of text to regclass, regconfig, ...).
CREATE FUNCTION kvg.verifier_reach(fn regprocedure, OUT object text, OUT definition text, OUT allowed boolean)
RETURNS SETOF record
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp SET quote_all_identifiers = off SET extra_float_digits = 1
SET datestyle = 'ISO, MDY' SET intervalstyle = postgres SET timezone = 'UTC' SET bytea_output = hex
SET standard_conforming_strings = on SET lc_monetary = 'C' SET xmloption = content
AS $$
  SELECT pg_describe_object(r.classid, r.objid, 0),
         coalesce(CASE r.classid
           WHEN 'pg_proc'::regclass THEN (
             SELECT CASE WHEN p.prokind IN ('a', 'w') THEN p.oid::regprocedure::text || ' aggregate'
                         ELSE pg_get_functiondef(p.oid) END
                    || E'\nowner ' || pg_get_userbyid(p.proowner)
                    || E'\nconfig ' || coalesce(array_to_string(p.proconfig, E'\n'), '')
             FROM pg_proc p WHERE p.oid = r.objid)
           WHEN 'pg_operator'::regclass THEN (
             SELECT format('%s code %s owner %s', o.oid::regoperator, o.oprcode::regprocedure,
                           pg_get_userbyid(o.oprowner))
             FROM pg_operator o WHERE o.oid = r.objid)
           WHEN 'pg_type'::regclass THEN (
             SELECT format('%s kind %s base %s notnull %s default %s owner %s labels %s', t.oid::regtype,
                           t.typtype, t.typbasetype::regtype, t.typnotnull, t.typdefault,
                           pg_get_userbyid(t.typowner),
                           (SELECT string_agg(quote_literal(e.enumlabel), ',' ORDER BY e.enumsortorder)
                            FROM pg_enum e WHERE e.enumtypid = t.oid))
             FROM pg_type t WHERE t.oid = r.objid)
           WHEN 'pg_class'::regclass THEN (
             SELECT format('%s kind %s owner %s rls %s %s columns %s', c.oid::regclass, c.relkind,
                           pg_get_userbyid(c.relowner), c.relrowsecurity, c.relforcerowsecurity,
                           (SELECT string_agg(quote_ident(a.attname) || ' ' || format_type(a.atttypid, a.atttypmod),
                                              ', ' ORDER BY a.attnum)
                            FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped))
                    || CASE c.relkind WHEN 'v' THEN E'\n' || pg_get_viewdef(c.oid)
                                      WHEN 'm' THEN E'\n' || pg_get_viewdef(c.oid)
                                      WHEN 'i' THEN E'\n' || pg_get_indexdef(c.oid) ELSE '' END
             FROM pg_class c WHERE c.oid = r.objid)
           WHEN 'pg_rewrite'::regclass THEN (
             SELECT pg_get_ruledef(w.oid) || ' enabled ' || w.ev_enabled::text FROM pg_rewrite w WHERE w.oid = r.objid)
           WHEN 'pg_trigger'::regclass THEN (
             SELECT pg_get_triggerdef(t.oid) || ' enabled ' || t.tgenabled::text FROM pg_trigger t WHERE t.oid = r.objid)
           WHEN 'pg_policy'::regclass THEN (
             SELECT format('policy %s on %s cmd %s permissive %s roles %s using %s check %s', quote_ident(p.polname),
                           p.polrelid::regclass, p.polcmd, p.polpermissive, p.polroles::regrole[],
                           pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid))
             FROM pg_policy p WHERE p.oid = r.objid)
           WHEN 'pg_attrdef'::regclass THEN (
             SELECT format('default of %s.%s: %s', d.adrelid::regclass, d.adnum, pg_get_expr(d.adbin, d.adrelid))
             FROM pg_attrdef d WHERE d.oid = r.objid)
           WHEN 'pg_constraint'::regclass THEN (
             SELECT pg_get_constraintdef(c.oid) || ' validated ' || c.convalidated::text || ' on '
                    || coalesce(c.conrelid::regclass::text, c.contypid::regtype::text)
             FROM pg_constraint c WHERE c.oid = r.objid)
           WHEN 'pg_cast'::regclass THEN (
             SELECT format('cast %s as %s with %s context %s method %s', c.castsource::regtype,
                           c.casttarget::regtype, c.castfunc::regprocedure, c.castcontext, c.castmethod)
             FROM pg_cast c WHERE c.oid = r.objid)
           ELSE pg_describe_object(r.classid, r.objid, 0)
         END, ''),
         CASE
           WHEN r.classid = 'pg_proc'::regclass THEN EXISTS (
             SELECT FROM pg_proc p
             WHERE p.oid = r.objid
               AND (kvg.builtin_function(p.oid)
                    OR (p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'sql') AND p.prosqlbody IS NOT NULL
                        AND p.prokind = 'f' AND NOT p.prosecdef AND p.proconfig IS NULL)))
           WHEN r.classid = 'pg_class'::regclass THEN false
           WHEN r.classid = 'pg_namespace'::regclass THEN true
           ELSE r.objid < 16384
         END
         AND coalesce((SELECT p.prosqlbody::text FROM pg_proc p WHERE r.classid = 'pg_proc'::regclass AND p.oid = r.objid),
                      '') !~ (
           SELECT ':funcid (' || string_agg(p.oid::text, '|') || ')[^0-9]'
                  || '|:(funcresulttype|resulttype) (' || (
                    SELECT string_agg(t.oid::text, '|') FROM pg_type t
                    WHERE t.typnamespace = 'pg_catalog'::regnamespace
                      AND t.typname IN ('regclass', 'regproc', 'regprocedure', 'regoper', 'regoperator', 'regtype',
                                        'regconfig', 'regdictionary', 'regnamespace', 'regrole', 'regcollation'))
                  || ')[^0-9]'
           FROM pg_proc p
           WHERE p.pronamespace = 'pg_catalog'::regnamespace
             AND p.proname IN ('query_to_xml', 'query_to_xmlschema', 'query_to_xml_and_xmlschema', 'ts_stat',
                               'ts_rewrite', 'table_to_xml', 'table_to_xmlschema', 'table_to_xml_and_xmlschema',
                               'schema_to_xml', 'schema_to_xmlschema', 'schema_to_xml_and_xmlschema',
                               'database_to_xml', 'database_to_xmlschema', 'database_to_xml_and_xmlschema'))
  FROM kvg.verifier_closure(fn) r
$$;
COMMENT ON FUNCTION kvg.verifier_reach(regprocedure) IS
  'Everything a function verifier reaches, each with its canonical definition and whether a verifier may reach it.';

-- What a verifier's freeze copies (extension/src/workers/verifier/
-- verifier_freeze.cpp): the functions of its closure that are not built in,
-- each with those of them it calls.
CREATE FUNCTION kvg.verifier_copies(fn regprocedure, OUT function oid, OUT callees oid[])
RETURNS SETOF record
LANGUAGE sql STABLE STRICT SET search_path = pg_catalog, pg_temp
AS $$
  WITH own AS (
    SELECT c.objid FROM kvg.verifier_closure(fn) c
    WHERE c.classid = 'pg_proc'::regclass AND NOT kvg.builtin_function(c.objid)
  )
  SELECT o.objid,
         ARRAY(SELECT DISTINCT d.refobjid FROM pg_depend d
               WHERE d.classid = 'pg_proc'::regclass AND d.objid = o.objid
                 AND d.refclassid = 'pg_proc'::regclass AND d.refobjid IN (SELECT objid FROM own)
               ORDER BY 1)
  FROM own o
$$;
COMMENT ON FUNCTION kvg.verifier_copies(regprocedure) IS
  'The functions a verifier''s freeze copies into kvg_frozen, each with those of them it calls.';

-- What a function verifier is pinned to: the SHA-256 of the canonical
-- definitions of everything it reaches (kvg.verifier_reach), in a fixed
-- order. A change to any of them, by anyone, changes the pin: the entry
-- fails closed.
CREATE FUNCTION kvg.function_pin(fn regprocedure) RETURNS text
LANGUAGE sql STABLE STRICT SET search_path = pg_catalog, pg_temp
AS $$
  SELECT encode(sha256(convert_to(
           'kvg-verifier-pin-v2' || E'\n'
           || string_agg(length(r.object)::text || ':' || r.object || E'\n' || length(r.definition)::text || ':'
                         || r.definition, E'\n' ORDER BY r.object COLLATE "C", r.definition COLLATE "C"),
         'UTF8')), 'hex')
  FROM kvg.verifier_reach(fn) r
  WHERE EXISTS (SELECT FROM pg_proc WHERE oid = fn)
$$;
COMMENT ON FUNCTION kvg.function_pin(regprocedure) IS
  'What a function verifier is pinned to: everything it reaches (kvg.verifier_reach), each by its definition, hashed.';

-- The library: one verified solution per question.
CREATE TABLE kvg.knowledge (
  id              bigserial PRIMARY KEY,
  question        text NOT NULL,
  question_key    text NOT NULL UNIQUE CHECK (question_key ~ '^[0-9a-f]{64}$'),
  solution        text NOT NULL,
  answer          text NOT NULL,
  verifier        text NOT NULL,   -- canonical form (kvg.verify, or a function's "schema"."name")
  evidence        text NOT NULL,   -- what the verifier found
  verified_at     timestamptz NOT NULL DEFAULT now(),
  verified_by     name NOT NULL,
  -- The leaf of the chain of the prompt that holds solution and question
  -- (kvg.knowledge_template when it was learned). Deferred like
  -- artifacts.parent_sha256, so that pg_restore may load either table first.
  -- Checked by constraint triggers rather than a foreign key
  -- (kvg.knowledge_artifact_check).
  artifact_sha256 text NOT NULL CHECK (artifact_sha256 ~ '^[0-9a-f]{64}$'),
  solve_tokens    bigint CHECK (solve_tokens >= 0),  -- what solving it cost, when known
  -- What routing compares questions with (kvg.related_knowledge).
  lexemes         text[] GENERATED ALWAYS AS
                    (tsvector_to_array(to_tsvector('english'::regconfig, question || ' ' || solution))) STORED,
  verifier_pin    text CHECK (verifier_pin ~ '^[0-9a-f]{64}$'),
  verifier_frozen text CHECK (verifier_frozen ~ '^kvg_frozen\.v_[0-9a-f]{40}$')
);
CREATE INDEX ON kvg.knowledge USING gin (lexemes);
CREATE INDEX ON kvg.knowledge (artifact_sha256);
CREATE CONSTRAINT TRIGGER knowledge_artifact_stored AFTER INSERT OR UPDATE OF artifact_sha256 ON kvg.knowledge
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION kvg.knowledge_artifact_check();
CREATE CONSTRAINT TRIGGER artifacts_entry_kept AFTER DELETE ON kvg.artifacts
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION kvg.artifact_entry_check();
COMMENT ON TABLE kvg.knowledge IS
  'Verified solutions, one per normalized question, each with the artifact of its prompt; see docs/flywheel.md.';
COMMENT ON COLUMN kvg.knowledge.verifier_pin IS
  'For a function verifier: kvg.function_pin of its frozen copy. NULL (for a function) fails closed: learn it again.';
COMMENT ON COLUMN kvg.knowledge.verifier_frozen IS
  'For a function verifier: its frozen copy in kvg_frozen, which answers run. NULL fails closed: learn it again.';

-- Who reads which artifact (docs/security.md, "Artifacts are private") -----------------------
-- An artifact's owners are the session users of the calls that stored it and
-- committed (kvg.artifact_claims.claimed_by; the same bytes stored by two
-- users belong to both). Published are the artifacts the shared library
-- names (kvg.knowledge.artifact_sha256) and every ancestor in their chains:
-- answering from an entry grafts its whole chain. A kvg_user reads its own
-- and published artifacts, nothing else; kvg_auditor reads all; the owner
-- and superusers are not subject to the rule.
--
-- A kvg_user does not read kvg.artifacts or kvg.artifact_claims at all: a
-- row-level policy would hide other users' rows but not their count, since
-- EXPLAIN ANALYZE reports the rows a policy's filter removed, and a
-- leakproof predicate of the reader's (text equality, a range of hashes)
-- runs below the policy as an index condition. It reads kvg.readable_artifacts,
-- whose rows come out of a function: a plan shows a function scan and counts
-- only the rows that function returned, whatever others stored. The C code
-- checks a named artifact (and prefix reuse finds links) with the owner's
-- rights and this same rule, kvg.artifact_readable
-- (extension/src/artifacts/artifact_access.cpp).
-- kvg.artifact_published reads with the owner's rights, under the latest
-- committed state.
CREATE FUNCTION kvg.artifact_published(artifact text) RETURNS boolean
AS 'MODULE_PATHNAME', 'kvg_artifact_published' LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION kvg.artifact_published(text) IS
  'Whether every user may read the artifact: a library entry names it or a continuation of it.';
-- The rule, for one artifact and the session user: a claim of its own,
-- found through the index, or published (asked only when not its own).
-- Not granted to users: it names another user's claim by its hash.
CREATE FUNCTION kvg.artifact_readable(artifact text) RETURNS boolean
LANGUAGE sql STABLE STRICT SET search_path = pg_catalog, pg_temp
AS $$ SELECT EXISTS (SELECT FROM kvg.artifact_claims c WHERE c.sha256 = artifact AND c.claimed_by = session_user)
             OR kvg.artifact_published(artifact) $$;
COMMENT ON FUNCTION kvg.artifact_readable(text) IS
  'Whether the session user may read the artifact: a committed claim of its own, or published.';
-- In C, with the owner's rights (extension/src/functions/reader_views.cpp):
-- a reader's plan shows the function scan and what it returned, never the
-- rows it passed over.
CREATE FUNCTION kvg.readable_artifact_rows() RETURNS SETOF kvg.artifacts
AS 'MODULE_PATHNAME', 'kvg_readable_artifact_rows' LANGUAGE C STABLE;
COMMENT ON FUNCTION kvg.readable_artifact_rows() IS
  'The artifacts the caller may read: its own and the published ones (all, for auditors; view kvg.readable_artifacts).';
CREATE VIEW kvg.readable_artifacts AS SELECT * FROM kvg.readable_artifact_rows();
COMMENT ON VIEW kvg.readable_artifacts IS
  'The artifacts a caller reads: its own (stored by its committed calls) and those the library publishes; '
  'all of them for kvg_auditor.';
-- Defense in depth: a role granted SELECT by mistake still reads no row
-- without a policy; auditors read all.
ALTER TABLE kvg.artifacts ENABLE ROW LEVEL SECURITY;
CREATE POLICY artifacts_auditor_all ON kvg.artifacts FOR SELECT TO kvg_auditor USING (true);
ALTER TABLE kvg.artifact_claims ENABLE ROW LEVEL SECURITY;

-- An entry states what was verified; replace it by deleting it and learning again.
CREATE TRIGGER knowledge_immutable BEFORE UPDATE ON kvg.knowledge
  FOR EACH STATEMENT EXECUTE FUNCTION kvg.refuse_change(
    'A verified entry is not edited; delete it and call kvg_learn again.');

-- Entries related to a question (transfer routing), most similar first: the
-- similarity is the share of the question's lexemes (English stemming, stop
-- words dropped) that occur in the entry's question or solution. Read
-- through the GIN index on lexemes with few candidates: an entry of
-- similarity >= min_similarity shares at least m of the question's n
-- lexemes (m the least count with m / n >= min_similarity, and at least 1),
-- so it shares at least one of ANY n - m + 1 of them. Those are chosen
-- rarest first by the column's statistics (pg_stats.most_common_elems; a
-- lexeme not listed there is rarer than every listed one), so a common word
-- in the question does not make every entry holding it a candidate. Which
-- lexemes are chosen changes only the work, never the rows returned
-- (docs/library-scale.md).
CREATE FUNCTION kvg.related_knowledge(question text, min_similarity double precision, max_entries integer)
RETURNS TABLE (id bigint, similarity double precision)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  q text[] := tsvector_to_array(to_tsvector('english'::regconfig, question));
  n integer := cardinality(q);
  m integer;
  common text[];
  freqs real[];
  probe text[];
BEGIN
  IF n = 0 THEN RETURN; END IF;
  SELECT coalesce(min(c), n) INTO m FROM generate_series(1, n) c WHERE c::float8 / n >= min_similarity;
  SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs INTO common, freqs
  FROM pg_stats s WHERE s.schemaname = 'kvg' AND s.tablename = 'knowledge' AND s.attname = 'lexemes';
  SELECT array_agg(l ORDER BY f, l) INTO probe
  FROM (SELECT l, coalesce(freqs[array_position(common, l)], 0) AS f FROM unnest(q) l ORDER BY f, l LIMIT n - m + 1) r;
  RETURN QUERY
    SELECT k.id, s.similarity
    FROM kvg.knowledge k,
         LATERAL (SELECT cardinality(ARRAY(SELECT unnest(q) INTERSECT SELECT unnest(k.lexemes)))::float8 / n
                   AS similarity) s
    WHERE k.lexemes && probe AND s.similarity >= min_similarity
    ORDER BY s.similarity DESC, k.id
    LIMIT max_entries;
END $$;
COMMENT ON FUNCTION kvg.related_knowledge(text, double precision, integer) IS
  'Library entries related to a question (transfer routing), most similar first.';

-- kvg_learn and kvg_solve both take the question, then the verifier.
CREATE FUNCTION public.kvg_learn(question text, verifier text, solution text, answer text,
                                 solve_tokens bigint DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'kvg_learn' LANGUAGE C VOLATILE COST 2000000;
COMMENT ON FUNCTION public.kvg_learn(text, text, text, text, bigint) IS
  'Checks the entry (solution, answer) with its verifier, captures the artifact of its prompt and stores it in '
  'kvg.knowledge; returns its id (the same id when the same entry is learned again).';

CREATE FUNCTION public.kvg_solve(question text, verifier text, max_tokens integer DEFAULT 32,
                                 attempts integer DEFAULT 3)
RETURNS TABLE (attempt integer, answer text, verified boolean, tokens_decoded integer, solve_tokens bigint,
               decode_ms double precision, knowledge_id bigint, audit_id bigint)
AS 'MODULE_PATHNAME', 'kvg_solve' LANGUAGE C VOLATILE ROWS 3 COST 3000000;
COMMENT ON FUNCTION public.kvg_solve(text, text, integer, integer) IS
  'Answers the question from scratch (greedy, then sampled), checks each attempt with the verifier and '
  'learns the first verified one with what it cost; one row per attempt.';

CREATE FUNCTION public.kvg_answer_detail(question text, max_tokens integer DEFAULT 32)
RETURNS TABLE (answer text, mode text, verified boolean, knowledge_id bigint, artifact text, tokens_grafted integer,
               tokens_prefilled integer, tokens_decoded integer, graft_ms double precision,
               decode_ms double precision, audit_id bigint)
AS 'MODULE_PATHNAME', 'kvg_answer_detail' LANGUAGE C VOLATILE ROWS 1 COST 1000000;
COMMENT ON FUNCTION public.kvg_answer_detail(text, integer) IS
  'Answers from the library: recurring (the question is known: graft its artifact), transfer (related entries '
  'as context) or cold; one line of answer, with how it was made.';

-- Set-based: every question of the array answered as kvg_answer_detail
-- answers it alone (the same bytes), generated together in shared batched
-- passes; n is the question's position. COST is per call: up to 256 answers.
CREATE FUNCTION public.kvg_answers(questions text[], max_tokens integer DEFAULT 32)
RETURNS TABLE (n integer, question text, answer text, mode text, verified boolean, knowledge_id bigint,
               artifact text, tokens_grafted integer, tokens_prefilled integer, tokens_decoded integer,
               graft_ms double precision, decode_ms double precision, audit_id bigint)
AS 'MODULE_PATHNAME', 'kvg_answers' LANGUAGE C VOLATILE ROWS 64 COST 64000000;
COMMENT ON FUNCTION public.kvg_answers(text[], integer) IS
  'Answers every question of the array (at most 256) as kvg_answer_detail does, the same bytes, in shared batched '
  'passes; one row per non-blank question, n its position.';

CREATE FUNCTION public.kvg_answer(question text, max_tokens integer DEFAULT 32) RETURNS text
AS 'MODULE_PATHNAME', 'kvg_answer' LANGUAGE C VOLATILE COST 1000000;
COMMENT ON FUNCTION public.kvg_answer(text, integer) IS
  'The answer of kvg_answer_detail, or NULL with a WARNING when the entry''s verifier rejects it '
  '(an error, 22V05, under kvg.on_rejected_answer = error).';

-- Accounting over the audit rows the caller may see (security_invoker: the
-- audit's row-level security applies): per routing mode (and 'all'), what
-- was grafted, prefilled and decoded, and what grafting cost and avoided.
-- Every figure is a count or a time, never negative. graft_ms is the time
-- the grafts took; recompute_ms estimates what prefilling the grafted
-- positions instead would have taken, from this model's measured prefill
-- cost per token (calls that prefilled at least 8 tokens; not solve
-- attempts, whose later attempts reuse the first one's prompt). They are
-- two figures, not one difference: a first graft of an artifact reads its
-- large object and hashes every byte, which on a small model takes longer
-- than recomputing its tokens (a "saving" of -8 ms), and later grafts are
-- served from the verified-artifact cache. solve_tokens_saved is, per
-- recurring answer, the entry's recorded solve cost less what the answer
-- computed, or 0 when the answer computed more.
CREATE VIEW kvg.stats WITH (security_invoker = true) AS
WITH calls AS (
  SELECT a.*, a.tokens_in - coalesce(a.tokens_grafted, 0) AS tokens_prefilled FROM kvg.readable_audit a
), rate AS (
  SELECT model_fingerprint, sum(prefill_us)::float8 / sum(tokens_prefilled) AS prefill_us_per_token
  FROM calls WHERE prefill_us IS NOT NULL AND tokens_prefilled >= 8 AND operation <> 'solve'
  GROUP BY model_fingerprint
), answers AS (
  SELECT c.mode, c.verified, c.tokens_grafted, c.tokens_prefilled, c.tokens_out AS tokens_decoded,
         c.graft_us, c.prefill_us, c.decode_us, r.prefill_us_per_token, k.solve_tokens
  FROM calls c
  LEFT JOIN rate r ON r.model_fingerprint = c.model_fingerprint
  LEFT JOIN kvg.knowledge k ON k.id = c.knowledge_id AND c.mode = 'recurring'
  WHERE c.operation = 'answer'
)
SELECT coalesce(mode, 'all') AS mode,
       count(*) AS answers,
       count(*) FILTER (WHERE verified) AS verified,
       sum(tokens_grafted) AS tokens_grafted,
       sum(tokens_prefilled) AS tokens_prefilled,
       sum(tokens_decoded) AS tokens_decoded,
       round(avg(tokens_decoded), 2) AS decoded_per_answer,
       round(avg(graft_us + prefill_us + decode_us) / 1000, 3) AS ms_per_answer,
       round(sum(graft_us)::numeric / 1000, 3) AS graft_ms,
       round(sum(tokens_grafted * prefill_us_per_token)::numeric / 1000, 3) AS recompute_ms,
       -- NULL where there is no solve cost to compare with; never below 0.
       sum(CASE WHEN solve_tokens - tokens_prefilled - tokens_decoded < 0 THEN 0
                ELSE solve_tokens - tokens_prefilled - tokens_decoded END) AS solve_tokens_saved
FROM answers
GROUP BY ROLLUP (answers.mode)
ORDER BY grouping(answers.mode), answers.mode;
COMMENT ON VIEW kvg.stats IS 'Answers by mode and what grafting saved; see docs/flywheel.md.';

-- No orphaned large objects (docs/artifact-lifecycle.md) --------------------------------------

-- Large objects cannot be extension members, so DROP EXTENSION kvg (or DROP
-- SCHEMA kvg CASCADE) would leave every artifact's object behind. This event
-- trigger fires before such a command (ddl_command_start: kvg.artifacts still
-- exists) and unlinks them in the same transaction, so a drop that fails or
-- rolls back keeps them. It has to fire before: an sql_drop trigger that is
-- itself a member of the extension is gone, with the artifacts table, by the
-- time sql_drop triggers run.
CREATE FUNCTION kvg.drop_guard() RETURNS event_trigger
AS 'MODULE_PATHNAME', 'kvg_drop_guard' LANGUAGE C;
COMMENT ON FUNCTION kvg.drop_guard() IS
  'Event trigger: DROP EXTENSION kvg or DROP SCHEMA kvg unlinks the artifacts'' large objects first.';
CREATE EVENT TRIGGER kvg_drop_unlinks_artifacts ON ddl_command_start
  WHEN TAG IN ('DROP EXTENSION', 'DROP SCHEMA') EXECUTE FUNCTION kvg.drop_guard();

-- Both directions of orphan: a large object that looks like an artifact
-- (owned by kvg's owner, beginning with the magic "KVGA") without a
-- kvg.artifacts row, and a row whose large object is gone; and artifacts
-- that nothing needs: stored for calls that rolled back (docs/audit-chain.md,
-- "Artifacts"). An artifact is referenced by a committed claim
-- (kvg.artifact_claims: a call that stored it committed), a library entry,
-- a stored continuation, or an audit row of a call that grafted it (as
-- kvg_artifact_delete counts them). One that an open transaction has just
-- stored is listed until that transaction commits its claim; kvg_vacuum
-- passes over it.
CREATE FUNCTION public.kvg_orphans()
RETURNS TABLE (kind text, loid oid, artifact text, bytes bigint)
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
  UNION ALL
  SELECT 'unreferenced_artifact', a.loid, a.sha256, a.bytes
  FROM kvg.artifacts a
  WHERE NOT EXISTS (SELECT FROM kvg.artifact_claims c WHERE c.sha256 = a.sha256)
    AND NOT EXISTS (SELECT FROM kvg.knowledge k WHERE k.artifact_sha256 = a.sha256)
    AND NOT EXISTS (SELECT FROM kvg.artifacts child WHERE child.parent_sha256 = a.sha256)
    AND NOT EXISTS (SELECT FROM kvg.audit u WHERE u.artifact_sha256 = a.sha256
                      AND u.operation NOT IN ('capture', 'import', 'learn', 'export'))
  ORDER BY 1, 2
$$;
COMMENT ON FUNCTION public.kvg_orphans() IS
  'Artifact large objects without a kvg.artifacts row, rows without their large object, and artifacts that nothing '
  'claims or references (none: consistent).';

-- Unlinks the objects kvg_orphans() finds without a row (left by a DROP
-- OWNED, or a restore into a database that held some), deletes the
-- unreferenced artifacts it finds, and the claims of artifacts no longer
-- stored (and all but the first claim of each owner: the claims say who
-- owns an artifact, docs/security.md) and their storage charges (deleting
-- an artifact uncharges it: kvg.storage_uncharge); returns how many
-- objects and artifacts it removed. Rows without an object are reported,
-- never deleted: their content is gone, and deciding that is the owner's.
-- It never waits: an artifact that a running call holds (FOR KEY SHARE, from
-- the moment it was stored until that call's transaction ends) is skipped,
-- and the candidates it did lock are checked again under a snapshot taken
-- after locking them, so a call that committed its claim meanwhile keeps
-- its artifact. READ COMMITTED only: a transaction snapshot would not see
-- those claims.
CREATE FUNCTION public.kvg_vacuum() RETURNS bigint
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  objects bigint;
  candidates text[];
  round bigint;
  collected bigint := 0;
BEGIN
  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'kvg_vacuum runs in READ COMMITTED transactions only, not %',
      current_setting('transaction_isolation')
      USING ERRCODE = 'invalid_transaction_state',
            HINT = 'Call it on its own (autocommit), or after BEGIN ISOLATION LEVEL READ COMMITTED.';
  END IF;
  SELECT count(lo_unlink(o.loid)) INTO objects FROM public.kvg_orphans() o WHERE o.kind = 'object_without_row';
  -- From the leaves up: a chain that rolled-back calls left is unreferenced
  -- one link at a time, as each continuation goes.
  LOOP
    SELECT array_agg(l.sha256) INTO candidates FROM (
      SELECT a.sha256 FROM kvg.artifacts a
      WHERE a.sha256 IN (SELECT o.artifact FROM public.kvg_orphans() o WHERE o.kind = 'unreferenced_artifact')
      FOR UPDATE OF a SKIP LOCKED) l;
    -- A new statement: its snapshot sees every claim committed before the
    -- locks above were granted.
    WITH gone AS (
      DELETE FROM kvg.artifacts a
      WHERE a.sha256 = ANY (coalesce(candidates, '{}'))
        AND a.sha256 IN (SELECT o.artifact FROM public.kvg_orphans() o WHERE o.kind = 'unreferenced_artifact')
      RETURNING 1)
    SELECT count(*) INTO round FROM gone;
    EXIT WHEN round = 0;
    collected := collected + round;
  END LOOP;
  DELETE FROM kvg.artifact_claims c
  WHERE NOT EXISTS (SELECT FROM kvg.artifacts a WHERE a.sha256 = c.sha256)
     OR EXISTS (SELECT FROM kvg.artifact_claims d
                WHERE d.sha256 = c.sha256 AND d.claimed_by = c.claimed_by AND d.id < c.id);
  -- A charge the writer made for an artifact that a delete was taking meanwhile.
  PERFORM kvg.storage_release(ARRAY(SELECT c.sha256 FROM kvg.storage_charges c
                                    WHERE NOT EXISTS (SELECT FROM kvg.artifacts a WHERE a.sha256 = c.sha256)));
  RETURN objects + collected;
END
$$;
COMMENT ON FUNCTION public.kvg_vacuum() IS
  'Unlinks artifact large objects that no kvg.artifacts row names and deletes artifacts that nothing claims or '
  'references (skipping those a running call holds); returns how many.';

-- Deleting an artifact (docs/operations.md, "Deleting an artifact") --------------------------
-- A plain DELETE FROM kvg.artifacts unlinks the large object (trigger
-- artifacts_unlink) but knows nothing of what relies on the artifact. This
-- function refuses, naming each, to delete an artifact that
--   * is a library entry's (kvg.knowledge): the entry could no longer be
--     answered from;
--   * is the parent of stored artifacts: a graft needs the whole chain, so
--     its continuations could no longer be grafted;
--   * was grafted by an audited call (generate, answer, chat, solve,
--     graft_check): that call's output could no longer be re-checked
--     against the bytes it grafted.
-- The audit rows that record an artifact's creation (capture, import,
-- learn) do not hold it back: what they state, that these bytes had this
-- SHA-256, stays checkable against any exported copy. Audit rows are never
-- changed, so the chain verifies either way.
-- force => true deletes it anyway, together with every artifact that
-- continues it (children, their children, ...) and the library entries of
-- any of them; a NOTICE names each entry and says which audit rows name a
-- deleted artifact. Returns the bytes of the artifacts deleted: space that
-- VACUUM pg_largeobject makes reusable. NULL or blank: NULL, nothing deleted.
CREATE FUNCTION public.kvg_artifact_delete(artifact text, force boolean DEFAULT false) RETURNS bigint
LANGUAGE plpgsql VOLATILE STRICT SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  doomed text[];
  needed text[] := '{}';
  what text;
  n bigint;
  first_id bigint;
  last_id bigint;
  entry record;
  freed bigint;
BEGIN
  IF btrim(artifact) = '' THEN
    RETURN NULL;
  END IF;
  IF artifact !~ '^[0-9a-f]{64}$' THEN
    RAISE EXCEPTION 'artifact must be 64 lowercase hexadecimal digits (a SHA-256), not "%"', artifact
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- Locked, so that two deletes of one chain do not interleave; a concurrent
  -- continuation or library entry is caught by the deferred foreign keys at
  -- commit (23503), as for any DELETE.
  PERFORM FROM kvg.artifacts a WHERE a.sha256 = artifact FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'artifact % is not stored', artifact USING ERRCODE = 'undefined_object';
  END IF;

  IF NOT force THEN
    SELECT string_agg(format('%s (%s)', k.id, quote_literal(left(k.question, 60))), ', ' ORDER BY k.id)
      INTO what FROM kvg.knowledge k WHERE k.artifact_sha256 = artifact;
    IF what IS NOT NULL THEN
      needed := needed || ('it is the artifact of library entry ' || what);
    END IF;
    SELECT count(*), string_agg(a.sha256, ', ' ORDER BY a.sha256)
      INTO n, what FROM kvg.artifacts a WHERE a.parent_sha256 = artifact;
    IF n > 0 THEN
      needed := needed || format('it is the parent of %s stored artifact%s (%s)', n,
                                 CASE WHEN n > 1 THEN 's' ELSE '' END, what);
    END IF;
    SELECT count(*), string_agg(DISTINCT u.operation, ', '), min(u.id)
      INTO n, what, first_id FROM kvg.audit u
      WHERE u.artifact_sha256 = artifact AND u.operation NOT IN ('capture', 'import', 'learn', 'export');
    IF n > 0 THEN
      needed := needed || format('%s audit row%s grafted it (%s; the first is id %s)', n,
                                 CASE WHEN n > 1 THEN 's' ELSE '' END, what, first_id);
    END IF;
    IF cardinality(needed) > 0 THEN
      RAISE EXCEPTION 'artifact % is still needed: %', artifact, array_to_string(needed, '; ')
        USING ERRCODE = 'dependent_objects_still_exist',
              HINT = 'kvg_artifact_delete(artifact, force => true) deletes it with its continuations and their '
                     'library entries; audit rows are kept (docs/operations.md).';
    END IF;
    doomed := ARRAY[artifact];
  ELSE
    WITH RECURSIVE chain(sha256) AS (
      SELECT artifact
      UNION
      SELECT a.sha256 FROM kvg.artifacts a JOIN chain c ON a.parent_sha256 = c.sha256
    )
    SELECT array_agg(c.sha256) INTO doomed FROM chain c;
    PERFORM FROM kvg.artifacts a WHERE a.sha256 = ANY (doomed) FOR UPDATE;
    FOR entry IN DELETE FROM kvg.knowledge k WHERE k.artifact_sha256 = ANY (doomed)
                 RETURNING k.id, k.question, k.artifact_sha256 LOOP
      RAISE NOTICE 'kvg_artifact_delete: deleted library entry % (%), whose artifact was %',
        entry.id, quote_literal(left(entry.question, 60)), entry.artifact_sha256;
    END LOOP;
    SELECT count(*), min(u.id), max(u.id) INTO n, first_id, last_id
      FROM kvg.audit u WHERE u.artifact_sha256 = ANY (doomed);
    IF n > 0 THEN
      RAISE NOTICE 'kvg_artifact_delete: % audit row% (ids % to %) name a deleted artifact; they are kept, and '
                   'the chain still verifies', n, CASE WHEN n > 1 THEN 's' ELSE '' END, first_id, last_id;
    END IF;
  END IF;

  WITH gone AS (DELETE FROM kvg.artifacts a WHERE a.sha256 = ANY (doomed) RETURNING a.bytes)
  SELECT coalesce(sum(g.bytes), 0) INTO freed FROM gone g;
  DELETE FROM kvg.artifact_claims c WHERE c.sha256 = ANY (doomed);
  RETURN freed;
END
$$;
COMMENT ON FUNCTION public.kvg_artifact_delete(text, boolean) IS
  'Deletes an artifact and its large object, refusing (2BP01) one that a library entry, a stored continuation or '
  'an audited graft needs, unless force => true (then its continuations and their library entries go too; audit '
  'rows stay). Returns the bytes deleted; VACUUM pg_largeobject makes them reusable.';

-- pg_dump -----------------------------------------------------------------------------------
-- pg_dump saves the rows of these tables (large objects are dumped anyway and
-- keep their OIDs on restore, so loid stays valid).

SELECT pg_catalog.pg_extension_config_dump('kvg.artifacts', '');
SELECT pg_catalog.pg_extension_config_dump('kvg.artifact_claims', '');
SELECT pg_catalog.pg_extension_config_dump('kvg.artifact_claims_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('kvg.audit', '');
SELECT pg_catalog.pg_extension_config_dump('kvg.audit_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('kvg.audit_head', '');
SELECT pg_catalog.pg_extension_config_dump('kvg.knowledge_templates', '');
SELECT pg_catalog.pg_extension_config_dump('kvg.knowledge', '');
SELECT pg_catalog.pg_extension_config_dump('kvg.knowledge_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('kvg.storage_charges', '');
SELECT pg_catalog.pg_extension_config_dump('kvg.storage_accounts', '');
SELECT pg_catalog.pg_extension_config_dump('kvg.storage_adjustments', '');

-- Privileges ----------------------------------------------------------------------------------
-- Functions are executable by PUBLIC when created; take that back from every
-- function of the extension, then grant each role what it needs. (Tables,
-- views and sequences grant PUBLIC nothing to begin with.)

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA kvg FROM PUBLIC;
DO $$
DECLARE
  f regprocedure;
BEGIN
  FOR f IN
    SELECT p.oid::regprocedure
    FROM pg_catalog.pg_proc p
    JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
    JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid AND e.extname = 'kvg'
    WHERE p.pronamespace = 'public'::regnamespace
  LOOP
    EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
  END LOOP;
END
$$;

-- kvg_user: the engine, the artifacts, the library, its own audit rows.
GRANT USAGE ON SCHEMA kvg TO kvg_user;
GRANT SELECT ON kvg.readable_artifacts, kvg.readable_audit, kvg.knowledge, kvg.stats, kvg.storage_usage,
                kvg.artifact_cache, kvg.engine_worker, kvg.progress TO kvg_user;
GRANT EXECUTE ON FUNCTION
  public.kvg_import(bytea, boolean),
  public.kvg_export(text),
  public.kvg_artifact_verify(text),
  public.kvg_capture(text, text),
  public.kvg_generate(text, integer, text, bigint, double precision),
  public.kvg_generate_bytes(text, integer, text, bigint, double precision),
  public.kvg_graft_check(text, text, integer),
  public.kvg_capture(integer[], text),
  public.kvg_generate(integer[], integer, text, bigint, double precision),
  public.kvg_generate_bytes(integer[], integer, text, bigint, double precision),
  public.kvg_graft_check(text, integer[], integer),
  public.kvg_tokenize(text, text),
  public.kvg_model_info(),
  public.kvg_engine_worker(),
  public.kvg_progress(),
  public.kvg_chat(jsonb, integer, text, bigint, double precision),
  public.kvg_chat_prompt(jsonb, text),
  public.kvg_generate_positional(text[], text, integer),
  public.kvg_learn(text, text, text, text, bigint),
  public.kvg_solve(text, text, integer, integer),
  public.kvg_answer_detail(text, integer),
  public.kvg_answer(text, integer),
  public.kvg_answers(text[], integer),
  public.kvg_audit_verify(bigint, text),
  kvg.audit_row_hash(kvg.audit),
  kvg.audit_field(text),
  kvg.artifact_cache_stats(),
  -- The rows of kvg.readable_artifacts, kvg.readable_audit and kvg.storage_usage.
  kvg.readable_artifact_rows(),
  kvg.readable_audit_rows(),
  kvg.storage_usage_rows(),
  -- The C code calls these as the caller (a verifier must run with the
  -- caller's rights); they are harmless to call directly.
  kvg.normalize_question(text),
  kvg.question_key(text),
  kvg.answer_words(text),
  kvg.verify(text, text, text, text),
  kvg.related_knowledge(text, double precision, integer)
TO kvg_user;

-- kvg_auditor: every audit row, and manifests (which hold every role's rows);
-- the artifacts and library entries a row names, and their bytes, so that
-- an auditor can reproduce a row (kvg reproduce, docs/audit-chain.md).
GRANT USAGE ON SCHEMA kvg TO kvg_auditor;
GRANT SELECT ON kvg.audit, kvg.audit_head, kvg.artifacts, kvg.readable_artifacts, kvg.readable_audit, kvg.knowledge,
                kvg.stats, kvg.knowledge_templates TO kvg_auditor;
-- The engine worker's figures, which sum every user's calls (a plain user
-- sees them null: extension/src/workers/engine/engine_worker.cpp).
GRANT SELECT ON kvg.engine_worker, kvg.progress TO kvg_auditor;
GRANT EXECUTE ON FUNCTION kvg.readable_artifact_rows(), kvg.readable_audit_rows(), public.kvg_engine_worker(),
                          public.kvg_progress() TO kvg_auditor;
GRANT EXECUTE ON FUNCTION public.kvg_manifest(bigint, bigint), public.kvg_manifest_lines(bigint, bigint),
                          kvg.manifest_entry(kvg.audit), kvg.manifest_head(), public.kvg_audit_verify(bigint, text),
                          public.kvg_audit_writers(), public.kvg_export(text),
                          kvg.audit_row_hash(kvg.audit), kvg.audit_field(text), kvg.audit_columns() TO kvg_auditor;

-- kvg_audit_writer: a standby's one way in.
GRANT USAGE ON SCHEMA kvg TO kvg_audit_writer;
GRANT EXECUTE ON FUNCTION kvg.audit_append_forwarded(jsonb), kvg.audit_columns() TO kvg_audit_writer;

-- kvg_orphans, kvg_vacuum and kvg_artifact_delete stay with the extension's owner
-- (and superusers): they read and unlink large objects of every role.
