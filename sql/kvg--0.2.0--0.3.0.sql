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

-- Deleting an artifact (docs/operations.md, "Deleting an artifact") ---------------
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
      WHERE u.artifact_sha256 = artifact AND u.operation NOT IN ('capture', 'import', 'learn');
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
  RETURN freed;
END
$$;
COMMENT ON FUNCTION public.kvg_artifact_delete(text, boolean) IS
  'Deletes an artifact and its large object, refusing (2BP01) one that a library entry, a stored continuation or '
  'an audited graft needs, unless force => true (then its continuations and their library entries go too; audit '
  'rows stay). Returns the bytes deleted; VACUUM pg_largeobject makes them reusable.';
REVOKE EXECUTE ON FUNCTION public.kvg_artifact_delete(text, boolean) FROM PUBLIC;
