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
  -- SHA-256 of this artifact's own token ids (u32 little-endian, as
  -- chain_tokens_sha256 in docs/artifact-format.md, but of its own tokens
  -- only): with parent_sha256 the key of a chain link, so that automatic
  -- prefix reuse finds stored chains without reading any large object.
  tokens_sha256     text CHECK (tokens_sha256 ~ '^[0-9a-f]{64}$'),
  created_at        timestamptz NOT NULL DEFAULT now(),
  created_by        name NOT NULL DEFAULT current_user
);
-- Serves both the prefix-reuse walk (children of a parent with given tokens;
-- roots are parent_sha256 IS NULL) and the parent foreign key's checks.
CREATE INDEX ON kvg.artifacts (parent_sha256, tokens_sha256);
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
  -- Added with the knowledge flywheel (docs/flywheel.md): how much of the
  -- prompt came from stored artifacts, how a question was routed, the entry
  -- used, whether its verifier accepted the answer, the output itself (so a
  -- manifest can be re-checked without the database), and where the time went.
  tokens_grafted    integer,
  mode              text CHECK (mode IN ('recurring', 'transfer', 'cold')),
  knowledge_id      bigint,
  verified          boolean,
  output_text       text,
  graft_us          bigint,
  prefill_us        bigint,
  decode_us         bigint,
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
           'kvg-audit-v2' || E'\n'
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
           || kvg.audit_field(a.tokens_grafted::text)
           || kvg.audit_field(a.mode)
           || kvg.audit_field(a.knowledge_id::text)
           || kvg.audit_field(CASE WHEN a.verified THEN 'true' WHEN NOT a.verified THEN 'false' END)
           || kvg.audit_field(a.output_text)
           || kvg.audit_field(a.graft_us::text)
           || kvg.audit_field(a.prefill_us::text)
           || kvg.audit_field(a.decode_us::text)
           || kvg.audit_field(a.prev_hash),
         'UTF8')), 'hex')
$$;

-- The only insert path (called by the C code's audit_append with the owner's
-- rights). Under the head row's lock it takes the next id, links the row to
-- the head's hash and moves the head.
CREATE FUNCTION kvg.audit_insert(operation text, role name, model_fingerprint text, recipe text,
                                 input_sha256 text, artifact_sha256 text, output_sha256 text,
                                 logits_sha256 text, tokens_in integer, tokens_out integer,
                                 tokens_grafted integer DEFAULT NULL, mode text DEFAULT NULL,
                                 knowledge_id bigint DEFAULT NULL, verified boolean DEFAULT NULL,
                                 output_text text DEFAULT NULL, graft_us bigint DEFAULT NULL,
                                 prefill_us bigint DEFAULT NULL, decode_us bigint DEFAULT NULL)
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
  r.tokens_grafted := audit_insert.tokens_grafted;
  r.mode := audit_insert.mode;
  r.knowledge_id := audit_insert.knowledge_id;
  r.verified := audit_insert.verified;
  r.output_text := audit_insert.output_text;
  r.graft_us := audit_insert.graft_us;
  r.prefill_us := audit_insert.prefill_us;
  r.decode_us := audit_insert.decode_us;
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

-- The verified-knowledge flywheel (docs/flywheel.md) ------------------------------

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

-- SHA-256 (lowercase hex) of the normal form's UTF-8 bytes.
CREATE FUNCTION kvg.question_key(question text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $$
  SELECT encode(sha256(convert_to(kvg.normalize_question(question), 'UTF8')), 'hex')
$$;

-- The words of an answer, as the verifiers compare them: ASCII letters
-- lower-cased, every other ASCII character that is not a digit a separator,
-- words joined by one space. ("Red!" and "red" are the same answer.)
CREATE FUNCTION kvg.answer_words(answer text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $$
  SELECT btrim(regexp_replace(translate(answer, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'),
                              '[\x01-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]+', ' ', 'g'), ' ')
$$;

-- Whether `candidate` passes `verifier`, in the canonical form kvg_learn
-- stores (docs/flywheel.md):
--   contains          the words of `reference` occur, in order and adjacent,
--                     among the words of `candidate`
--   exact:<text>      the candidate's words are the words of <text>
--   regex:<pattern>   the candidate matches <pattern> (a PostgreSQL regular expression)
--   "schema"."name"   that function (question text, answer text) returns true;
--                     it runs as the caller, like any function the caller calls
-- Not SECURITY DEFINER: a verifier can do nothing its caller could not.
CREATE FUNCTION kvg.verify(verifier text, question text, candidate text, reference text) RETURNS boolean
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  fn regprocedure;
  target text;
  returns_bool boolean;
  ok boolean;
BEGIN
  IF verifier = 'contains' THEN
    RETURN kvg.answer_words(reference) <> ''
       AND position(' ' || kvg.answer_words(reference) || ' ' IN ' ' || kvg.answer_words(candidate) || ' ') > 0;
  ELSIF starts_with(verifier, 'exact:') THEN
    RETURN kvg.answer_words(candidate) = kvg.answer_words(substr(verifier, 7));
  ELSIF starts_with(verifier, 'regex:') THEN
    RETURN candidate ~ substr(verifier, 7);
  END IF;
  fn := to_regprocedure(verifier || '(text, text)');
  IF fn IS NULL THEN
    RAISE EXCEPTION 'verifier function %(text, text) does not exist', verifier
      USING ERRCODE = 'undefined_function',
            HINT = 'A verifier is contains, exact:<answer>, regex:<pattern>, or a function (question text, answer text) returning boolean.';
  END IF;
  SELECT format('%I.%I', n.nspname, p.proname), p.prorettype = 'boolean'::regtype INTO target, returns_bool
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE p.oid = fn;
  IF NOT returns_bool THEN
    RAISE EXCEPTION 'verifier function % does not return boolean', fn USING ERRCODE = 'datatype_mismatch';
  END IF;
  EXECUTE format('SELECT %s($1, $2)', target) INTO ok USING question, candidate;
  RETURN coalesce(ok, false);
END
$$;

-- The library: one verified solution per question.
CREATE TABLE kvg.knowledge (
  id              bigserial PRIMARY KEY,
  question        text NOT NULL,
  question_key    text NOT NULL UNIQUE CHECK (question_key ~ '^[0-9a-f]{64}$'),
  solution        text NOT NULL,
  answer          text NOT NULL,
  verifier        text NOT NULL,   -- canonical form (kvg.verify)
  evidence        text NOT NULL,   -- what the verifier found
  verified_at     timestamptz NOT NULL DEFAULT now(),
  verified_by     name NOT NULL,
  -- The leaf of the chain of the prompt that holds solution and question
  -- (kvg.knowledge_template when it was learned). Deferred like
  -- artifacts.parent_sha256, so that pg_restore may load either table first.
  artifact_sha256 text NOT NULL REFERENCES kvg.artifacts DEFERRABLE INITIALLY DEFERRED,
  solve_tokens    bigint CHECK (solve_tokens >= 0),  -- what solving it cost, when known
  -- What routing compares questions with (kvg.related_knowledge).
  lexemes         text[] GENERATED ALWAYS AS
                    (tsvector_to_array(to_tsvector('english'::regconfig, question || ' ' || solution))) STORED
);
CREATE INDEX ON kvg.knowledge USING gin (lexemes);
CREATE INDEX ON kvg.knowledge (artifact_sha256);
COMMENT ON TABLE kvg.knowledge IS
  'Verified solutions, one per normalized question, each with the artifact of its prompt; see docs/flywheel.md.';

-- An entry states what was verified; replace it by deleting it and learning again.
CREATE TRIGGER knowledge_immutable BEFORE UPDATE ON kvg.knowledge
  FOR EACH STATEMENT EXECUTE FUNCTION kvg.refuse_change(
    'A verified entry is not edited; delete it and call kvg_learn again.');

SELECT pg_catalog.pg_extension_config_dump('kvg.knowledge', '');
SELECT pg_catalog.pg_extension_config_dump('kvg.knowledge_id_seq', '');

-- Entries related to a question, most similar first: the similarity is the
-- share of the question's lexemes (English stemming, stop words dropped)
-- that occur in the entry's question or solution.
CREATE FUNCTION kvg.related_knowledge(question text, min_similarity double precision, max_entries integer)
RETURNS TABLE (id bigint, similarity double precision)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
  WITH q AS (SELECT tsvector_to_array(to_tsvector('english'::regconfig, question)) AS lexemes)
  SELECT k.id, s.similarity
  FROM q, kvg.knowledge k,
       LATERAL (SELECT cardinality(ARRAY(SELECT unnest(q.lexemes) INTERSECT SELECT unnest(k.lexemes)))::float8
                       / cardinality(q.lexemes) AS similarity) s
  WHERE cardinality(q.lexemes) > 0 AND k.lexemes && q.lexemes AND s.similarity >= min_similarity
  ORDER BY s.similarity DESC, k.id
  LIMIT max_entries
$$;

CREATE FUNCTION public.kvg_learn(question text, solution text, answer text, verifier text DEFAULT 'contains',
                                 solve_tokens bigint DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'kvg_learn' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION public.kvg_learn(text, text, text, text, bigint) IS
  'Checks the entry with its verifier, captures the artifact of its prompt and stores it in kvg.knowledge; '
  'returns its id (the same id when the same entry is learned again).';

CREATE FUNCTION public.kvg_solve(question text, verifier text, max_tokens integer DEFAULT 64,
                                 attempts integer DEFAULT 3)
RETURNS TABLE (attempt integer, answer text, verified boolean, tokens_decoded integer, solve_tokens bigint,
               decode_ms double precision, knowledge_id bigint, audit_id bigint)
AS 'MODULE_PATHNAME', 'kvg_solve' LANGUAGE C VOLATILE ROWS 3;
COMMENT ON FUNCTION public.kvg_solve(text, text, integer, integer) IS
  'Answers the question from scratch (greedy, then sampled), checks each attempt with the verifier and '
  'learns the first verified one with what it cost; one row per attempt.';

CREATE FUNCTION public.kvg_answer_detail(question text, max_tokens integer DEFAULT 32)
RETURNS TABLE (answer text, mode text, verified boolean, knowledge_id bigint, artifact text, tokens_grafted integer,
               tokens_prefilled integer, tokens_decoded integer, graft_ms double precision,
               decode_ms double precision, audit_id bigint)
AS 'MODULE_PATHNAME', 'kvg_answer_detail' LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION public.kvg_answer_detail(text, integer) IS
  'Answers from the library: recurring (the question is known: graft its artifact), transfer (related entries '
  'as context) or cold; one line of answer, with how it was made.';

CREATE FUNCTION public.kvg_answer(question text, max_tokens integer DEFAULT 32) RETURNS text
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$ SELECT d.answer FROM public.kvg_answer_detail(question, max_tokens) d $$;
COMMENT ON FUNCTION public.kvg_answer(text, integer) IS 'The answer of kvg_answer_detail.';

-- Accounting over the audit trail: per routing mode (and 'all'), what was
-- grafted, prefilled and decoded, and what grafting saved. "Saved against
-- recomputing" counts grafted positions and estimates their time from this
-- model's measured prefill cost per token (calls that prefilled at least 8
-- tokens; not solve attempts, whose later attempts reuse the first one's
-- prompt), less the time the grafts took; "saved against solving" is the
-- entry's recorded solve cost less what the recurring answer computed.
CREATE VIEW kvg.stats AS
WITH calls AS (
  SELECT a.*, a.tokens_in - coalesce(a.tokens_grafted, 0) AS tokens_prefilled FROM kvg.audit a
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
       sum(tokens_grafted) AS recompute_tokens_saved,
       round((sum(tokens_grafted * prefill_us_per_token) - sum(graft_us))::numeric / 1000, 3) AS recompute_ms_saved,
       sum(solve_tokens - tokens_prefilled - tokens_decoded) AS solve_tokens_saved
FROM answers
GROUP BY ROLLUP (answers.mode)
ORDER BY grouping(answers.mode), answers.mode;
COMMENT ON VIEW kvg.stats IS 'Answers by mode and what grafting saved; see docs/flywheel.md.';

-- Manifests ---------------------------------------------------------------------------

-- Audit rows [from_id, to_id] (either bound open when NULL) with every field
-- of their row hash, the output text among them, so that a third party can
-- re-check each hash and re-score answers without kvg or the database
-- (scripts/kvg-manifest-check.py).
CREATE FUNCTION public.kvg_manifest(from_id bigint DEFAULT NULL, to_id bigint DEFAULT NULL) RETURNS jsonb
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
  SELECT jsonb_build_object(
    'format', 'kvg-manifest-v1',
    'row_encoding', 'kvg-audit-v2',
    'from_id', kvg_manifest.from_id,
    'to_id', kvg_manifest.to_id,
    'head', (SELECT jsonb_build_object('last_id', h.last_id, 'last_hash', h.last_hash) FROM kvg.audit_head h),
    'entries', coalesce(jsonb_agg(jsonb_build_object(
        'id', a.id,
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
        'prev_hash', a.prev_hash,
        'row_hash', a.row_hash) ORDER BY a.id), '[]'::jsonb))
  FROM kvg.audit a
  WHERE (kvg_manifest.from_id IS NULL OR a.id >= kvg_manifest.from_id)
    AND (kvg_manifest.to_id IS NULL OR a.id <= kvg_manifest.to_id)
$$;
COMMENT ON FUNCTION public.kvg_manifest(bigint, bigint) IS
  'Audit rows with everything needed to re-check their hashes and outputs offline (scripts/kvg-manifest-check.py).';

-- Privileges --------------------------------------------------------------------

REVOKE ALL ON ALL TABLES IN SCHEMA kvg FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA kvg FROM PUBLIC;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA kvg FROM PUBLIC;
-- The user-facing kvg_* functions live in schema public, so that they are
-- callable as kvg_*(...) right after CREATE EXTENSION with the default
-- search_path; the extension's tables and helpers stay in schema kvg. They
-- are found as members of this extension, so the list is never restated.
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
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO kvg_user', f);
  END LOOP;
END
$$;

GRANT USAGE ON SCHEMA kvg TO kvg_user;
GRANT SELECT ON kvg.artifacts, kvg.audit, kvg.audit_head, kvg.knowledge, kvg.stats TO kvg_user;
GRANT EXECUTE ON FUNCTION
  kvg.audit_row_hash(kvg.audit),
  kvg.audit_field(text),
  -- The C code calls these as the caller (a verifier must run with the
  -- caller's rights); they are harmless to call directly.
  kvg.normalize_question(text),
  kvg.question_key(text),
  kvg.answer_words(text),
  kvg.verify(text, text, text, text),
  kvg.related_knowledge(text, double precision, integer)
TO kvg_user;
