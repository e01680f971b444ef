-- kvg 0.2.0 -> 0.3.0. CREATE EXTENSION kvg runs kvg--0.1.0.sql and then each
-- upgrade script in order, so a new installation and an upgraded one are the
-- same schema by construction. Each feature adds its own section below.

\echo Use "ALTER EXTENSION kvg UPDATE TO '0.3.0'" to load this file. \quit

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
