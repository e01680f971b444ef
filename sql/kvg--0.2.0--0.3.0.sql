-- kvg 0.2.0 -> 0.3.0. CREATE EXTENSION kvg runs kvg--0.1.0.sql and then each
-- upgrade script in order, so a new installation and an upgraded one are the
-- same schema by construction. Each feature adds its own section below.

\echo Use "ALTER EXTENSION kvg UPDATE TO '0.3.0'" to load this file. \quit

-- kvg_chat ----------------------------------------------------------------------------------

-- A conversation answered as the model's assistant, laid out in the chat
-- format of the model's tokenizer.chat_template (docs/chat.md). The audit row
-- has operation 'chat' and input_sha256 of the laid-out prompt text.
CREATE FUNCTION public.kvg_chat(messages jsonb, max_tokens integer DEFAULT 64, format text DEFAULT 'auto',
                                seed bigint DEFAULT NULL, temperature double precision DEFAULT 0)
RETURNS text
AS 'MODULE_PATHNAME', 'kvg_chat' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION public.kvg_chat(jsonb, integer, text, bigint, double precision) IS
  'The assistant''s answer to messages ([{"role": "system|user|assistant", "content": "..."}, ...], the last the '
  'user''s), laid out in the model''s chat format (format: auto, plain, chatml, llama3, gemma, phi3, mistral); '
  'stops at the end of its turn; temperature 0 is greedy, seed NULL means 0.';
REVOKE EXECUTE ON FUNCTION public.kvg_chat(jsonb, integer, text, bigint, double precision) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.kvg_chat(jsonb, integer, text, bigint, double precision) TO kvg_user;

-- What kvg_chat asks the model, without running it: the format, the laid-out
-- prompt text (the audit's input_sha256 is its SHA-256) and its tokens.
CREATE FUNCTION public.kvg_chat_prompt(messages jsonb, format text DEFAULT 'auto')
RETURNS TABLE (format text, prompt text, tokens integer[])
AS 'MODULE_PATHNAME', 'kvg_chat_prompt' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION public.kvg_chat_prompt(jsonb, text) IS
  'The chat format, laid-out prompt text and prompt tokens kvg_chat would use for messages (no model run, no audit row).';
REVOKE EXECUTE ON FUNCTION public.kvg_chat_prompt(jsonb, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.kvg_chat_prompt(jsonb, text) TO kvg_user;

-- scale-out ------------------------------------------------------------------------
-- Hot standbys answer from the replicated library and artifacts; their audit
-- rows are appended here, on the primary, in its one hash chain
-- (docs/scale-out.md). A standby connects with kvg.audit_conninfo as a
-- member of kvg_audit_writer and calls kvg.audit_append_forwarded, which may
-- do nothing else: it reads no audit rows and can write only through it.

DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'kvg_audit_writer') THEN
    CREATE ROLE kvg_audit_writer NOLOGIN;
  END IF;
END
$$;

-- The audit row of a call a standby answered, with kvg.audit_insert's
-- arguments (role as text: the standby's calling role), inserted as a local
-- call's row and linked into the chain before it returns, so that the
-- standby learns the row's id, seq and row_hash. The transaction is the
-- caller's (the standby's one statement), so the row is committed when the
-- standby has its answer. Refuses rows of what only a primary does (import,
-- capture, learn, solve), an output_sha256 that does not cover the output,
-- and running on a standby.
CREATE FUNCTION kvg.audit_append_forwarded(operation text, role text, model_fingerprint text, recipe text,
                                           input_sha256 text, artifact_sha256 text, output_sha256 text,
                                           logits_sha256 text, tokens_in integer, tokens_out integer,
                                           tokens_grafted integer, mode text, knowledge_id bigint,
                                           verified boolean, output_text text, graft_us bigint,
                                           prefill_us bigint, decode_us bigint, kv_proven boolean,
                                           output_bytes bytea)
RETURNS TABLE (id bigint, seq bigint, row_hash text)
AS 'MODULE_PATHNAME', 'kvg_audit_append_forwarded' LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION kvg.audit_append_forwarded(text, text, text, text, text, text, text, text, integer, integer,
                                               integer, text, bigint, boolean, text, bigint, bigint, bigint,
                                               boolean, bytea) IS
  'Appends the audit row of a call a hot standby answered; for kvg_audit_writer (docs/scale-out.md).';
REVOKE EXECUTE ON FUNCTION kvg.audit_append_forwarded(text, text, text, text, text, text, text, text, integer,
                                                      integer, integer, text, bigint, boolean, text, bigint, bigint,
                                                      bigint, boolean, bytea) FROM PUBLIC;
GRANT USAGE ON SCHEMA kvg TO kvg_audit_writer;
GRANT EXECUTE ON FUNCTION kvg.audit_append_forwarded(text, text, text, text, text, text, text, text, integer,
                                                     integer, integer, text, bigint, boolean, text, bigint, bigint,
                                                     bigint, boolean, bytea) TO kvg_audit_writer;

-- positional composition ------------------------------------------------------
-- The paper's multi-block context (docs/composition.md): blocks captured on
-- their own, placed one after another without recomputation. Cheap and NOT
-- exact: the result says exact = false; the audit row has mode 'positional'
-- and kv_proven = false. Refused (0A000) while kvg.require_exact is on.
-- An audit row's mode may now say so (the row encoding is unchanged).
ALTER TABLE kvg.audit DROP CONSTRAINT audit_mode_check,
  ADD CONSTRAINT audit_mode_check CHECK (mode IN ('recurring', 'transfer', 'cold', 'positional'));
ALTER TABLE kvg.audit_pending DROP CONSTRAINT audit_mode_check,
  ADD CONSTRAINT audit_mode_check CHECK (mode IN ('recurring', 'transfer', 'cold', 'positional'));
CREATE FUNCTION public.kvg_generate_positional(blocks text[], prompt text, max_tokens integer DEFAULT 64)
RETURNS TABLE (output text, exact boolean, tokens_composed integer, tokens_prefilled integer,
               tokens_decoded integer, compose_ms double precision, decode_ms double precision, audit_id bigint)
AS 'MODULE_PATHNAME', 'kvg_generate_positional' LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION public.kvg_generate_positional(text[], text, integer) IS
  'Places the blocks (artifact chains from position 0) one after another, re-rotating their keys, evaluates '
  'prompt after them and decodes greedily: cheap, NOT exact (exact is always false).';
REVOKE EXECUTE ON FUNCTION public.kvg_generate_positional(text[], text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.kvg_generate_positional(text[], text, integer) TO kvg_user;

-- library routing at scale ------------------------------------------------------
-- kvg.related_knowledge (transfer routing, docs/flywheel.md) with the same
-- result, read through the GIN index on lexemes with fewer candidates: an
-- entry of similarity >= min_similarity shares at least m of the question's
-- n lexemes (m the least count with m / n >= min_similarity, and at least
-- 1), so it shares at least one of ANY n - m + 1 of them. Those are chosen
-- rarest first by the column's statistics (pg_stats.most_common_elems; a
-- lexeme not listed there is rarer than every listed one), so a common word
-- in the question no longer makes every entry holding it a candidate. Which
-- lexemes are chosen changes only the work, never the rows returned
-- (docs/library-scale.md).
CREATE OR REPLACE FUNCTION kvg.related_knowledge(question text, min_similarity double precision, max_entries integer)
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

-- verified-artifact cache -------------------------------------------------------------------
-- Each backend keeps the bytes of artifacts it has read and hashed in full
-- (up to kvg.artifact_cache_memory, a superuser setting; 0: off), so that a
-- recurring graft copies them instead of reading and hashing them again
-- (docs/artifact-lifecycle.md). This function shows this backend's use of it.
CREATE FUNCTION public.kvg_artifact_cache_stats()
RETURNS jsonb
AS 'MODULE_PATHNAME', 'kvg_artifact_cache_stats' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION public.kvg_artifact_cache_stats() IS
  'This backend''s verified-artifact cache: entries, bytes, capacity (kvg.artifact_cache_memory), and hits, misses '
  'and evictions since the backend started.';
REVOKE EXECUTE ON FUNCTION public.kvg_artifact_cache_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.kvg_artifact_cache_stats() TO kvg_user;

-- audit written by the extension's worker (docs/audit-chain.md) -------------------------
-- kvg is loaded at server start (shared_preload_libraries): its settings
-- exist from the first statement and its audit writer is a background
-- worker with shared memory. Refused here, with the line to add, otherwise.
CREATE FUNCTION kvg.require_preload() RETURNS void
AS 'MODULE_PATHNAME', 'kvg_require_preload' LANGUAGE C VOLATILE;
SELECT kvg.require_preload();
REVOKE EXECUTE ON FUNCTION kvg.require_preload() FROM PUBLIC;

-- An audited call hands its row to the audit writer of its database, which
-- inserts and links it in a transaction of its own (many calls' rows per
-- commit) before the call returns. No row waits in the caller's transaction
-- any more, so no deferred trigger, no pending table, no lock on the head in
-- anyone's transaction but the writer's.
DROP TRIGGER audit_link_at_commit ON kvg.audit_pending;
DROP FUNCTION kvg.audit_link();
DROP FUNCTION kvg.audit_move_pending(bigint, bigint, text);
DROP TABLE kvg.audit_pending;
DROP FUNCTION kvg.audit_insert(text, name, text, text, text, text, text, text, integer, integer, integer, text,
                               bigint, boolean, text, bigint, bigint, bigint, boolean, bytea);

-- kvg-audit-v4 adds, after v3's fields:
-- caller_xid     the calling (sub)transaction (pg_xact_status tells whether it
--                committed: an answer a rolled-back transaction used still
--                has its row); NULL for a standby's forwarded rows
-- session_role   session_user of the call (role is current_user)
-- temperature, top_p, seed, max_tokens, stop_reason
--                how the output was decoded (NULL where nothing was decoded)
-- prompt_tokens_sha256  SHA-256 of the laid-out prompt's token ids (int32
--                little-endian), template_sha256 of the knowledge template
--                that laid out a flywheel prompt
-- artifact_chain the artifacts grafted, root first, comma-separated
ALTER TABLE kvg.audit ADD COLUMN caller_xid xid8, ADD COLUMN session_role name,
  ADD COLUMN temperature double precision, ADD COLUMN top_p double precision, ADD COLUMN seed bigint,
  ADD COLUMN max_tokens integer, ADD COLUMN stop_reason text, ADD COLUMN prompt_tokens_sha256 text,
  ADD COLUMN template_sha256 text, ADD COLUMN artifact_chain text,
  DROP CONSTRAINT audit_row_encoding_check,
  ADD CONSTRAINT audit_row_encoding_check CHECK (row_encoding IN ('kvg-audit-v2', 'kvg-audit-v3', 'kvg-audit-v4')),
  ALTER COLUMN row_encoding SET DEFAULT 'kvg-audit-v4';

CREATE OR REPLACE FUNCTION kvg.audit_row_hash(a kvg.audit) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $$
  SELECT encode(sha256(convert_to(
           a.row_encoding || E'\n'
           || kvg.audit_field(a.id::text)
           || CASE WHEN a.row_encoding <> 'kvg-audit-v2' THEN kvg.audit_field(a.seq::text) ELSE '' END
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
           || CASE WHEN a.row_encoding <> 'kvg-audit-v2'
                   THEN kvg.audit_field(CASE WHEN a.kv_proven THEN 'true' WHEN NOT a.kv_proven THEN 'false' END)
                        || kvg.audit_field(encode(a.output_bytes, 'hex'))
                   ELSE '' END
           || CASE WHEN a.row_encoding = 'kvg-audit-v4'
                   THEN kvg.audit_field(a.caller_xid::text)
                        || kvg.audit_field(a.session_role::text)
                        || kvg.audit_field(a.temperature::numeric::text)
                        || kvg.audit_field(a.top_p::numeric::text)
                        || kvg.audit_field(a.seed::text)
                        || kvg.audit_field(a.max_tokens::text)
                        || kvg.audit_field(a.stop_reason)
                        || kvg.audit_field(a.prompt_tokens_sha256)
                        || kvg.audit_field(a.template_sha256)
                        || kvg.audit_field(a.artifact_chain)
                   ELSE '' END
           || kvg.audit_field(a.prev_hash),
         'UTF8')), 'hex')
$$;

-- Inserts one row and links it as the chain's next (returns its id). The
-- audit writer calls it for every row, in its own READ COMMITTED
-- transaction: the EXCLUSIVE lock on the head (readers are not blocked) is
-- held from here to that commit, by the writer only. A superuser may call
-- it directly (the tests do); then the caller's transaction holds the head.
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
                                 template_sha256 text DEFAULT NULL, artifact_chain text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  r kvg.audit;
  head record;
BEGIN
  LOCK TABLE kvg.audit_head IN EXCLUSIVE MODE;
  SELECT h.last_seq, h.last_hash INTO head FROM kvg.audit_head h;
  -- No head: the first row ever, or a deleted head. Continuing after the
  -- last seq from 64 zeros keeps a deleted head evident (kvg_audit_verify).
  IF NOT FOUND THEN
    INSERT INTO kvg.audit_head (last_id, last_seq, last_hash)
    VALUES (NULL, (SELECT max(a.seq) FROM kvg.audit a), repeat('0', 64))
    RETURNING last_seq, last_hash INTO head;
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
  UPDATE kvg.audit_head SET last_id = r.id, last_seq = r.seq, last_hash = r.row_hash;
  RETURN r.id;
END
$$;
REVOKE EXECUTE ON FUNCTION kvg.audit_insert(text, name, text, text, text, text, text, text, integer, integer,
                                            integer, text, bigint, boolean, text, bigint, bigint, bigint, boolean,
                                            bytea, xid8, name, double precision, double precision, bigint, integer,
                                            text, text, text, text) FROM PUBLIC;

-- The audit writers at work: one row per database whose writer runs.
CREATE FUNCTION public.kvg_audit_writers(OUT database oid, OUT pid integer, OUT state text,
                                         OUT rows_written bigint, OUT commits bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'kvg_audit_writers' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION public.kvg_audit_writers() IS
  'The audit writer of each database (a background worker): its pid, state, rows written and commits.';

-- Manifests carry kvg-audit-v4's fields; temperature and top_p as the text
-- the row hash takes (float8 -> numeric: the same digits whatever
-- extra_float_digits is), so scripts/kvg-manifest-check.py hashes them as given.
CREATE OR REPLACE FUNCTION public.kvg_manifest(from_seq bigint DEFAULT NULL, to_seq bigint DEFAULT NULL) RETURNS jsonb
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
        'row_hash', a.row_hash) ORDER BY a.seq), '[]'::jsonb))
  FROM kvg.audit a
  WHERE (kvg_manifest.from_seq IS NULL OR a.seq >= kvg_manifest.from_seq)
    AND (kvg_manifest.to_seq IS NULL OR a.seq <= kvg_manifest.to_seq)
$$;
REVOKE EXECUTE ON FUNCTION public.kvg_audit_writers() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.kvg_audit_writers() TO kvg_auditor;

-- kvg_audit_verify() names the first bad row; this says where and why: the
-- first chain position (seq) that does not verify, its row's id, and the
-- reason (NULLs when the whole chain verifies). Same checks, same order as
-- kvg.audit_first_bad (docs/audit-chain.md), run with the owner's rights.
CREATE FUNCTION public.kvg_audit_verify_detail(OUT first_bad_seq bigint, OUT first_bad_id bigint, OUT reason text)
RETURNS record
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
  WITH chain AS (
    SELECT a.id, a.seq, a.prev_hash, a.row_hash, kvg.audit_row_hash(a) AS recomputed,
           lag(a.row_hash, 1, repeat('0', 64)) OVER (ORDER BY a.seq) AS expected_prev,
           row_number() OVER (ORDER BY a.seq) AS position
    FROM kvg.audit a
  ), bad AS (
    SELECT seq, id,
           CASE WHEN seq IS DISTINCT FROM position
                  THEN format('a row is missing before this one (seq %s at chain position %s)', seq, position)
                WHEN row_hash IS DISTINCT FROM recomputed
                  THEN 'its row_hash is not the hash of its fields (the row was changed)'
                ELSE 'its prev_hash is not the row_hash of the row before it' END AS reason
    FROM chain
    WHERE row_hash IS DISTINCT FROM recomputed OR prev_hash IS DISTINCT FROM expected_prev
       OR seq IS DISTINCT FROM position
    ORDER BY seq LIMIT 1
  ), last AS (
    SELECT id, seq, row_hash FROM kvg.audit ORDER BY seq DESC LIMIT 1
  ), tail AS (
    SELECT CASE WHEN h.singleton IS NULL THEN (SELECT seq FROM kvg.audit ORDER BY seq LIMIT 1)
                WHEN l.id IS NULL OR h.last_seq > l.seq OR h.last_hash IS DISTINCT FROM l.row_hash THEN h.last_seq
                WHEN h.last_seq IS NULL OR h.last_seq < l.seq THEN coalesce(h.last_seq, 0) + 1 END AS seq,
           CASE WHEN h.singleton IS NULL THEN (SELECT id FROM kvg.audit ORDER BY seq LIMIT 1)
                WHEN l.id IS NULL OR h.last_seq > l.seq OR h.last_hash IS DISTINCT FROM l.row_hash THEN h.last_id
                WHEN h.last_seq IS NULL OR h.last_seq < l.seq THEN
                  (SELECT id FROM kvg.audit WHERE seq > coalesce(h.last_seq, 0) ORDER BY seq LIMIT 1) END AS id,
           CASE WHEN h.singleton IS NULL THEN 'the chain''s head (kvg.audit_head) is missing'
                WHEN l.id IS NULL OR h.last_seq > l.seq THEN 'the rows up to the head''s last_seq are gone (cut off)'
                WHEN h.last_seq IS NULL OR h.last_seq < l.seq THEN 'rows follow the head without having moved it'
                WHEN h.last_hash IS DISTINCT FROM l.row_hash THEN 'the head''s last_hash is not the last row''s row_hash'
           END AS reason
    FROM last l FULL JOIN kvg.audit_head h ON true
  )
  SELECT p.seq, p.id, p.reason
  FROM (SELECT 1 AS k, * FROM bad
        UNION ALL SELECT 2, * FROM tail WHERE tail.reason IS NOT NULL
        UNION ALL SELECT 3, NULL, NULL, NULL) p
  ORDER BY p.k LIMIT 1
$$;
COMMENT ON FUNCTION public.kvg_audit_verify_detail() IS
  'Where the hash-chained audit trail first fails to verify (seq, id) and why; NULLs when it verifies.';
REVOKE EXECUTE ON FUNCTION public.kvg_audit_verify_detail() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.kvg_audit_verify_detail() TO kvg_user, kvg_auditor;

-- An auditor reproduces rows: it reads the artifacts and library entries a
-- row names and exports the artifacts (kvg reproduce, docs/audit-chain.md).
GRANT SELECT ON kvg.artifacts, kvg.knowledge TO kvg_auditor;
GRANT EXECUTE ON FUNCTION public.kvg_export(text) TO kvg_auditor;
