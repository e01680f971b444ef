-- Trust boundaries (docs/security.md), tried as a hostile kvg_user would:
--  1. a forged artifact (one user's header and tokens, another's KV) is
--     refused on import, and stored unverified it is never grafted into
--     another user's call: output with prefix reuse on = output with it off;
--  2. a function verifier needs kvg_author (the rest of what verifiers
--     promise: 23_verifier_isolation.sql);
--  3. work is bounded before it starts (prompt bytes, threads, temperature,
--     import size; what a role may store: 24_storage_quota.sql);
--  4. a kvg_user sees its own audit rows, kvg_auditor all of them.
BEGIN;
SELECT plan(35);
\getenv data KVG_TEST_DATA
\set small :data '/models/stories260K.gguf'
SELECT set_config('kvg.model', :'small', true) \g /dev/null
SELECT set_config('kvg.device', 'cpu', true) \g /dev/null

\ir sessions.psql
CREATE ROLE tap_alice IN ROLE kvg_user;
CREATE ROLE tap_mallory IN ROLE kvg_user;
CREATE ROLE tap_audit IN ROLE kvg_auditor;

-- 1. Forged KV ------------------------------------------------------------------

SET ROLE tap_alice;
SELECT kvg_capture('Once upon a time, there was a little girl named Lily.') AS genuine \gset
SET ROLE tap_mallory;
SELECT kvg_capture('The dog was bad. It bit the girl') AS donor \gset
SELECT kvg_export(:'genuine') AS genuine_bytes, kvg_export(:'donor') AS donor_bytes \gset
RESET ROLE;
SELECT is(length(:'genuine_bytes'::bytea), length(:'donor_bytes'::bytea), 'both captures hold 16 tokens: same layout');

-- The genuine header and tokens with the donor's KV and a recomputed trailer;
-- low mantissa bits flipped until its SHA-256 sorts before the genuine one,
-- so that a store choosing the smallest of equal chains would prefer it.
CREATE FUNCTION pg_temp.forge(genuine bytea, donor bytea) RETURNS bytea LANGUAGE plpgsql AS $$
DECLARE
  header_bytes int := get_byte(genuine, 8) + 256 * get_byte(genuine, 9) + 65536 * get_byte(genuine, 10);
  body bytea := substr(genuine, 1, header_bytes)
                || substr(donor, header_bytes + 1, length(genuine) - header_bytes - 32);
  forged bytea;
  i int := 0;
BEGIN
  LOOP
    forged := body || sha256(body);
    EXIT WHEN encode(sha256(forged), 'hex') COLLATE "C" < encode(sha256(genuine), 'hex') COLLATE "C";
    body := set_byte(body, header_bytes + 4 * i, get_byte(body, header_bytes + 4 * i) # 1);
    i := i + 1;
  END LOOP;
  RETURN forged;
END
$$;
-- One float of a genuine artifact replaced (little-endian bytes), trailer recomputed.
CREATE FUNCTION pg_temp.with_float(art bytea, float_index int, le_bytes bytea) RETURNS bytea LANGUAGE plpgsql AS $$
DECLARE
  at int := get_byte(art, 8) + 256 * get_byte(art, 9) + 65536 * get_byte(art, 10) + 4 * float_index;
  body bytea := overlay(substr(art, 1, length(art) - 32) PLACING le_bytes FROM at + 1);
BEGIN
  RETURN body || sha256(body);
END
$$;
SELECT pg_temp.forge(:'genuine_bytes', :'donor_bytes') AS forged \gset
SELECT encode(sha256(:'forged'::bytea), 'hex') AS forged_sha \gset

SELECT served AS served_before_import FROM kvg_engine_worker() \gset
SET ROLE tap_mallory;
SELECT throws_ok(format('SELECT kvg_import(%L::bytea)', :'forged'), '22V05', NULL,
                 'a forged artifact is refused on import: its KV is not what the model computes for its tokens');
RESET ROLE;
SELECT is((SELECT served FROM kvg_engine_worker()), :served_before_import + 1::bigint,
          'the recomputation that refused it ran in the engine worker (kvg.engine''s default here)');
SET ROLE tap_mallory;
SELECT is(kvg_import(:'forged', verify => false), :'forged_sha', 'stored unverified when asked (verify => false)');
RESET ROLE;
SELECT is(provenance, 'unverified', 'and recorded as unverified') FROM kvg.artifacts WHERE sha256 = :'forged_sha';

SET ROLE tap_alice;
SET kvg.prefix_reuse = off;
SELECT kvg_generate('Once upon a time, there was a little girl named Lily. She liked to', 16) AS cold \gset
SET kvg.prefix_reuse = on;
SELECT is(kvg_generate('Once upon a time, there was a little girl named Lily. She liked to', 16), :'cold',
          'with a forged chain stored under the same tokens, prefix reuse gives the same output as no reuse');
SELECT is(artifact_sha256, :'genuine', 'and grafts the genuine artifact, not the forged one')
FROM kvg.readable_audit WHERE operation = 'generate' ORDER BY seq DESC LIMIT 1;
SELECT is(kv_proven, true, 'the audit row says every grafted KV is proven')
FROM kvg.readable_audit WHERE operation = 'generate' ORDER BY seq DESC LIMIT 1;
-- Asked for by name, an unverified artifact is grafted, and said to be unproven.
SET client_min_messages = error;
SELECT kvg_generate(' She liked to', 4, artifact => :'forged_sha') \g /dev/null
RESET client_min_messages;
SELECT is(kv_proven, false, 'an unverified artifact grafted on request: the audit row says kv_proven = false')
FROM kvg.readable_audit WHERE operation = 'generate' ORDER BY seq DESC LIMIT 1;
SELECT is(exact, false, 'and kvg_graft_check shows it differs from recomputation')
FROM kvg_graft_check(:'forged_sha', ' She liked to');
SELECT row(c.*)::text AS forged_check FROM kvg_graft_check(:'forged_sha', ' She liked to', 2) c \gset
RESET ROLE;
-- That check ran in the engine worker (kvg.engine's default here); a
-- backend's judges the forgery with the same hashes and the same KL.
SET kvg.engine = backend;
SET ROLE tap_alice;
SELECT is((SELECT row(c.*)::text FROM kvg_graft_check(:'forged_sha', ' She liked to', 2) c), :'forged_check',
          'a backend''s graft check of it gives the worker''s row, hashes and KL included');
RESET ROLE;
RESET kvg.engine;

-- Non-finite KV is refused even unverified; a huge finite value is caught by
-- recomputation, and a graft check over it never claims KL 0.
SELECT pg_temp.with_float(:'genuine_bytes', 100, '\x0000c07f') AS nan_art,
       pg_temp.with_float(:'genuine_bytes', 100, '\x0000807f') AS inf_art,
       pg_temp.with_float(:'genuine_bytes', 100, '\x9bb2617f') AS huge_art \gset
SET ROLE tap_mallory;
SELECT throws_like(format('SELECT kvg_import(%L::bytea, verify => false)', :'nan_art'), '%NaN%',
                   'NaN in the KV is refused on import');
SELECT throws_like(format('SELECT kvg_import(%L::bytea, verify => false)', :'inf_art'), '%infinite%',
                   'an infinite KV value is refused on import');
SELECT throws_ok(format('SELECT kvg_import(%L::bytea)', :'huge_art'), '22V05', NULL,
                 'a finite but false value (3e38) fails recomputation');
SELECT kvg_import(:'huge_art', verify => false) AS huge_sha \gset
SELECT ok(kl_max <> 0 AND NOT exact, 'a graft check over a 3e38 value reports neither KL 0 nor exact')
FROM kvg_graft_check(:'huge_sha', ' She liked to');
RESET ROLE;

-- A genuine artifact imported unverified becomes trusted once it is
-- imported with verification (recomputed: the same bytes). Artifacts are
-- committed by the audit writer and this transaction holds the ones it
-- stored, so another session captures a fresh one, exports it and deletes
-- it (docs/audit-chain.md, "Artifacts").
SELECT pg_temp.connect('owner'), dblink_exec('owner', format('SET kvg.model = %L', :'small')),
       dblink_exec('owner', 'SET kvg.device = cpu') \g /dev/null
SELECT b AS fresh_bytes FROM dblink('owner', $$SELECT kvg_export(kvg_capture('Once upon a time, there was a boy named Tim.'))$$)
  AS t(b bytea) \gset
SELECT encode(sha256(:'fresh_bytes'::bytea), 'hex') AS fresh \gset
SELECT dblink_exec('owner', format('DELETE FROM kvg.artifact_claims WHERE sha256 = %L', :'fresh')),
       dblink_exec('owner', format('DELETE FROM kvg.artifacts WHERE sha256 = %L', :'fresh')) \g /dev/null
SET ROLE tap_mallory;
SELECT kvg_import(:'fresh_bytes', verify => false) \g /dev/null
RESET ROLE;
SELECT is(provenance, 'unverified', 'a genuine artifact imported without verification is unverified')
FROM kvg.artifacts WHERE sha256 = :'fresh';
SET ROLE tap_mallory;
SELECT is(kvg_import(:'fresh_bytes'), :'fresh', 'imported again with verification');
RESET ROLE;
SELECT is(provenance, 'verified', 'it is now verified') FROM kvg.artifacts WHERE sha256 = :'fresh';
SELECT ok(tokens_in = (SELECT n_tokens FROM kvg.artifacts WHERE sha256 = :'fresh') AND prefill_us IS NOT NULL
          AND kv_proven, 'the import''s audit row records what recomputing cost')
FROM kvg.readable_audit WHERE operation = 'import' AND artifact_sha256 = :'fresh' ORDER BY seq DESC LIMIT 1;
-- Continuing an unverified chain computes derived links, never trusted ones.
SET ROLE tap_mallory;
SET client_min_messages = error;
SELECT kvg_capture(' She liked to', artifact => :'forged_sha') AS derived \gset
RESET client_min_messages;
RESET ROLE;
SELECT is(provenance, 'derived', 'a capture continuing an unverified artifact is derived, not computed')
FROM kvg.artifacts WHERE sha256 = :'derived';

-- 2. Verifiers ----------------------------------------------------------------------

CREATE SCHEMA tap_m AUTHORIZATION tap_mallory;
GRANT USAGE ON SCHEMA tap_m TO PUBLIC;
SET ROLE tap_mallory;
CREATE FUNCTION tap_m.accept(q text, a text) RETURNS boolean LANGUAGE sql AS 'SELECT true';
SELECT throws_ok($$SELECT kvg_learn('What did the bad dog do?', 'tap_m.accept', 'The dog bit the girl.', 'bit')$$,
                 '42501', NULL, 'a function verifier needs kvg_author');
RESET ROLE;
-- What a function verifier is pinned to, how it runs and who it runs as:
-- 23_verifier_isolation.sql (its functions must be committed: it runs in a
-- session of its own).

-- 3. Bounded work -------------------------------------------------------------------

SET ROLE tap_alice;
SELECT throws_ok($$SELECT kvg_generate(repeat('a', 50 * 1024 * 1024), 4)$$, '54000', NULL,
                 'a 50 MB prompt is refused by its length, before it is tokenized');
SELECT throws_ok($$SELECT kvg_answer(repeat('why ', 1000000), 4)$$, '54000', NULL, 'so is a 4 MB question');
SELECT throws_ok($$SELECT kvg_generate('Once', 4, temperature => 1e308)$$, '22023', NULL,
                 'a temperature that is infinite as a float is refused');
SELECT is(kvg_generate('', 4), NULL, 'an empty prompt gives NULL, and no work (docs/sql.md)');
SELECT is(kvg_capture(''), NULL, 'so does an empty prefix');
RESET ROLE;
SET kvg.max_threads = 2;
SET ROLE tap_alice;
SET kvg.threads = 3;
SELECT throws_like($$SELECT kvg_generate('Once', 4)$$, '%exceeds kvg.max_threads%',
                   'kvg.threads beyond the superuser''s kvg.max_threads is refused');
SELECT throws_ok($$SET kvg.max_threads = 64$$, '42501', NULL, 'only a superuser sets kvg.max_threads');
RESET kvg.threads;
RESET ROLE;

SET kvg.max_import_bytes = '1kB';
SET ROLE tap_mallory;
SELECT throws_ok(format('SELECT kvg_import(%L::bytea)', :'donor_bytes'), '54000', NULL,
                 'an import above kvg.max_import_bytes is refused before it is read');
RESET ROLE;
RESET kvg.max_import_bytes;

-- 4. Who sees what --------------------------------------------------------------------

SET ROLE tap_alice;
SELECT is(count(*) FILTER (WHERE role <> 'tap_alice'), 0::bigint, 'a kvg_user sees only its own audit rows')
FROM kvg.readable_audit;
SELECT cmp_ok(count(*), '>', 0::bigint, 'and does see those') FROM kvg.readable_audit;
SELECT is((kvg_audit_verify()).ok, true, 'kvg_audit_verify still checks the whole chain for it');
SELECT throws_ok($$SELECT kvg_manifest()$$, '42501', NULL, 'a kvg_user cannot produce a manifest');
SET ROLE tap_audit;
SELECT is((SELECT count(*) FROM kvg.readable_audit), (SELECT jsonb_array_length(kvg_manifest()->'entries'))::bigint,
          'kvg_auditor sees every row and puts them all in a manifest');
SELECT cmp_ok((SELECT count(DISTINCT role) FROM kvg.readable_audit), '>=', 3::bigint, 'rows of every role among them');
RESET ROLE;

SELECT dblink_disconnect('owner') \g /dev/null
SELECT * FROM finish();
ROLLBACK;
