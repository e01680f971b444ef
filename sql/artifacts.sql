-- Storing, exporting and verifying artifacts (no engine needed). The
-- fixtures are written by storage's own codec (extension/test/make_fixtures.cpp).
SET search_path = kvg, public;
\getenv fixtures KVG_FIXTURES
SELECT pg_read_binary_file(:'fixtures' || '/root.kvga') AS root,
       pg_read_binary_file(:'fixtures' || '/child.kvga') AS child,
       pg_read_binary_file(:'fixtures' || '/orphan.kvga') AS orphan,
       pg_read_binary_file(:'fixtures' || '/large.kvga') AS large \gset

-- The identity is the SHA-256 of all the bytes.
SELECT kvg_import(:'root', verify => false) = encode(sha256(:'root'), 'hex') AS root_imported;
SELECT kvg_import(:'child', verify => false) = encode(sha256(:'child'), 'hex') AS child_imported;
-- More than two 4 MB large-object chunks, ending mid-chunk.
SELECT kvg_import(:'large', verify => false) = encode(sha256(:'large'), 'hex') AS large_imported;

-- Catalog columns come from the header.
SELECT bytes, n_tokens, recipe, length(model_fingerprint) AS fingerprint_len,
       parent_sha256 = encode(sha256(:'root'), 'hex') AS parent_is_root,
       created_by = current_user AS by_me
FROM artifacts ORDER BY bytes;

-- Identical content is stored once.
SELECT kvg_import(:'root', verify => false) = encode(sha256(:'root'), 'hex') AS same_identity;
SELECT count(*) AS root_rows FROM artifacts WHERE sha256 = encode(sha256(:'root'), 'hex');
SELECT count(*) AS orphan_objects FROM pg_largeobject_metadata m
WHERE NOT EXISTS (SELECT FROM artifacts a WHERE a.loid = m.oid);

-- Export returns exactly the imported bytes.
SELECT kvg_export(encode(sha256(:'root'), 'hex')) = :'root'::bytea AS root_round_trip;
SELECT kvg_export(encode(sha256(:'large'), 'hex')) = :'large'::bytea AS large_round_trip;

SELECT sha256 = encode(sha256(kvg_export(sha256)), 'hex') AS exported_hash_matches,
       (kvg_artifact_verify(sha256)).ok AS verifies
FROM artifacts ORDER BY bytes;

-- A continuation needs its parent already stored.
SELECT kvg_import(:'orphan', verify => false);
\echo :LAST_ERROR_SQLSTATE

-- Damage a stored object behind kvg's back: verify says false (and why),
-- export refuses to hand out the bytes.
SELECT lo_put(loid, 300, '\xff') FROM artifacts WHERE sha256 = encode(sha256(:'child'), 'hex');
SELECT ok AS child_verifies, reason FROM kvg_artifact_verify(encode(sha256(:'child'), 'hex'));
\set VERBOSITY sqlstate
SELECT kvg_export(encode(sha256(:'child'), 'hex'));
\set VERBOSITY default

-- Import and verify in one statement: the read sees the statement's own write.
DELETE FROM artifacts WHERE sha256 = encode(sha256(:'child'), 'hex');
SELECT (kvg_artifact_verify(kvg_import(:'child', verify => false))).ok AS child_verifies_again;

-- Deleting a row removes its large object; a parent cannot go first.
\set VERBOSITY sqlstate
DELETE FROM artifacts WHERE sha256 = encode(sha256(:'root'), 'hex');
\set VERBOSITY default
DELETE FROM artifacts WHERE sha256 = encode(sha256(:'child'), 'hex');
SELECT count(*) AS orphan_objects FROM pg_largeobject_metadata m
WHERE NOT EXISTS (SELECT FROM artifacts a WHERE a.loid = m.oid);

-- Every import and every export is in the audit trail, and the chain verifies.
SELECT operation, role = current_user AS by_me, artifact_sha256 IS NOT NULL AS has_artifact
FROM audit ORDER BY id;
SELECT * FROM kvg_audit_verify();
