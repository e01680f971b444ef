-- After ALTER EXTENSION kvg UPDATE from 0.1.0 (seed.sql): artifacts,
-- library and audit chain are intact; what 0.1.0 imported is unverified;
-- function verifiers deposited before pinning fail closed; the chain
-- continues with rows of the new encoding and still verifies.
BEGIN;
SELECT plan(13);
SELECT is(extversion, (SELECT default_version FROM pg_available_extensions WHERE name = 'kvg'), 'updated to the default version') FROM pg_extension WHERE extname = 'kvg';
SELECT is(count(*), 3::bigint, 'every artifact row kept') FROM kvg.artifacts;
SELECT ok(bool_and(public.kvg_artifact_verify(sha256)), 'every artifact still verifies') FROM kvg.artifacts;
SELECT is(array_agg(provenance ORDER BY bytes, sha256),
          (SELECT array_agg(CASE WHEN u.artifact_sha256 IS NULL THEN 'computed' ELSE 'unverified' END
                            ORDER BY a.bytes, a.sha256)
           FROM kvg.artifacts a LEFT JOIN kvg.audit u ON u.operation = 'import' AND u.artifact_sha256 = a.sha256),
          'what 0.1.0 imported is unverified, what it captured computed')
FROM kvg.artifacts;
SELECT is(count(*), 2::bigint, 'every library entry kept') FROM kvg.knowledge;
SELECT is(verifier_pin, NULL, 'a function verifier deposited before pinning has no pin (it fails closed)')
FROM kvg.knowledge WHERE verifier LIKE '%upgrade_verifier%';
SELECT is(public.kvg_audit_verify(), NULL, 'the 0.1.0 chain verifies after the update');
SELECT is(array_agg(DISTINCT row_encoding), ARRAY['kvg-audit-v2'], 'its rows keep their encoding') FROM kvg.audit;
SELECT is(array_agg(seq ORDER BY seq), array_agg(id ORDER BY id), 'they are numbered in their chain order')
FROM kvg.audit;

SELECT max(seq) AS last_seq, (SELECT row_hash FROM kvg.audit ORDER BY seq DESC LIMIT 1) AS last_hash FROM kvg.audit \gset
\getenv fixtures KVG_FIXTURES
SELECT public.kvg_import(pg_read_binary_file(:'fixtures' || '/large.kvga'), verify => false) \g /dev/null
SELECT is(row_encoding, 'kvg-audit-v4', 'a new row uses the new encoding')
FROM kvg.audit ORDER BY seq DESC LIMIT 1;
SELECT is(prev_hash, :'last_hash', 'and links to the last 0.1.0 row') FROM kvg.audit WHERE seq = :last_seq + 1;
SELECT is(public.kvg_audit_verify(), NULL, 'the mixed chain verifies');
SELECT is(kvg_manifest()->>'format', 'kvg-manifest-v2', 'manifests cover it (checked offline by pg-test.sh)');

SELECT * FROM finish();
ROLLBACK;
