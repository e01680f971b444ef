// SQL functions over stored artifacts: import (which recomputes what it is
// given unless told not to), export and verify. Every byte is checked by
// storage's codec; nothing here parses.
#include <string>

#include "common/error.hpp"
#include "engine/artifact_recheck.hpp"
#include "extension/src/artifacts/artifact_access.hpp"
#include "extension/src/audit/audit.hpp"
#include "extension/src/calls/engine_call.hpp"
#include "extension/src/runs/recompute_run.hpp"
#include "extension/src/artifacts/artifact_settings.hpp"
#include "extension/src/pg/sql_raise.hpp"
#include "extension/src/artifacts/lo_store.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/spi/spi.hpp"
#include "extension/src/spi/sql_values.hpp"
#include "extension/src/roles/standby.hpp"
#include "storage/artifact_format.hpp"
#include "extension/src/pg/postgres.hpp"

using namespace kvg;
using namespace kvg::pg;

namespace {

// Which catalog column (if any) disagrees with what the bytes say.
std::optional<std::string> catalog_disagreement(const StoredArtifact& row, const VerifiedArtifact& art,
                                                uint64_t bytes_read) {
  const ArtifactMeta meta = meta_from_header(art.header);
  if (row.bytes != bytes_read) return "bytes";
  if (row.meta.n_tokens && row.meta.n_tokens != meta.n_tokens) return "n_tokens";
  if (row.meta.model_fingerprint && row.meta.model_fingerprint != meta.model_fingerprint) return "model_fingerprint";
  if (row.meta.recipe && row.meta.recipe != meta.recipe) return "recipe";
  if (row.meta.parent != meta.parent) return "parent_sha256";
  if (row.meta.tokens_sha256 && row.meta.tokens_sha256 != meta.tokens_sha256) return "tokens_sha256";
  return std::nullopt;
}

}  // namespace

// kvg_import(data bytea, verify boolean default true) returns text: bounds
// the input (kvg.max_import_bytes) before reading it,
// validates the whole artifact (header rules, trailer, identity, finite KV),
// and — with verify — recomputes its KV with the loaded model from its tokens
// alone (in worker mode in the engine worker: recompute_run.hpp) and
// refuses it unless the bytes are equal (docs/security.md). Stores
// it once with its provenance, charged to the session user like every
// artifact (kvg.storage_quota, 53400), and records the import in the audit
// trail.
// STRICT; no bytes at all give NULL (docs/sql.md).
KVG_SQL_FUNCTION(kvg_import) {
  if (arg_bytes(fcinfo, 0) == 0) PG_RETURN_NULL();
  refuse_on_standby("kvg_import", "it stores an artifact");
  const bool verify = PG_GETARG_BOOL(1);
  const uint64_t size = arg_bytes(fcinfo, 0);
  if (size > settings::max_import_bytes())
    throw Error(ErrorCode::OutOfRange, "an artifact of " + std::to_string(size) + " bytes exceeds kvg.max_import_bytes (" +
                                           std::to_string(settings::max_import_bytes()) + ")");
  Spi spi;
  LoStore store(spi);
  const auto bytes = bytea_arg(fcinfo, 0);
  const VerifiedArtifact art = verify_artifact(bytes);
  // Continuing a chain is reading it: an import may not name a parent the
  // caller could not name itself (docs/security.md).
  if (art.header.parent) require_readable(spi, *art.header.parent);
  if (const auto bad = first_non_finite_kv(art.header, bytes))
    throw Error(ErrorCode::InvalidArgument, "the artifact holds a non-finite KV value (" + *bad +
                                                "): no model computes that, so it is refused");

  AuditRecord audit;
  audit.operation = "import";
  audit.model_fingerprint = to_hex(art.header.model_fingerprint);
  audit.recipe = art.header.recipe;
  audit.kv_proven = false;
  Provenance provenance = Provenance::Unverified;
  if (verify) {
    const Recomputed r = run_recompute(art.header, store);
    if (r.identity != art.identity)
      raise_sqlstate("22V05",
                     "the artifact's KV is not what the loaded model computes for its tokens (recomputed " +
                         std::to_string(r.tokens) + " tokens: " + to_hex(r.identity) + ")",
                     "It was forged, damaged before its trailer was written, or computed by another engine. "
                     "kvg_import(data, verify => false) stores it unverified: never grafted unless asked for.");
    provenance = Provenance::Verified;
    audit.kv_proven = true;
    audit.tokens_in = int32_t(r.tokens);
    audit.prefill_us = to_micros(r.seconds);
  }
  MemorySource src(bytes);
  const Digest id = store.put(src, meta_from_header(art.header), provenance);
  if (id != art.identity) throw Error(ErrorCode::Internal, "store and codec disagree on the artifact's SHA-256");
  audit.artifact_sha256 = to_hex(id);
  audit_append(spi, audit);
  return text_result(to_hex(id));
}

// kvg_export(artifact text) returns bytea: the stored bytes, hash-checked on
// the way out (an object that no longer matches its identity is an error).
// Only of an artifact the caller may read (artifact_access.hpp). An export
// hands out a prompt's tokens, so it is audited like a call: a row naming
// the reader and the artifact is committed before the bytes are returned.
// STRICT; a blank artifact gives NULL (docs/sql.md).
KVG_SQL_FUNCTION(kvg_export) {
  if (arg_is_blank(fcinfo, 0)) PG_RETURN_NULL();
  const Digest id = digest_arg(fcinfo, 0, "artifact");
  Spi spi;
  LoStore store(spi);
  require_readable(spi, id);
  const StoredArtifact row = store.require(id);
  uint8_t* data = nullptr;
  const Datum result = bytea_result(row.bytes, &data);
  auto src = store.get(id);
  const size_t got = read_fully(*src, data, row.bytes);
  uint8_t extra;
  // The final read (returning 0) is where the source checks the hash.
  if (got != row.bytes || src->read(&extra, 1) != 0)
    throw Error(ErrorCode::Corrupt, "artifact " + to_hex(id) + ": large object size differs from kvg.artifacts.bytes (" +
                                        std::to_string(row.bytes) + ")");
  AuditRecord audit;
  audit.operation = "export";
  audit.artifact_sha256 = to_hex(id);
  audit.output_sha256 = to_hex(id);  // the bytes returned hash to the artifact's identity
  if (row.meta.model_fingerprint) audit.model_fingerprint = to_hex(*row.meta.model_fingerprint);
  audit.recipe = row.meta.recipe;
  audit_append(spi, audit);
  return result;
}

// kvg_artifact_verify(artifact text, OUT ok, OUT first_bad, OUT reason), the
// shape of every verify function (docs/sql.md): re-reads the large
// object, re-hashes it, re-validates header and trailer and compares the
// catalog row. ok false, first_bad the artifact and reason why for damaged
// content; an unknown hash is an error, not false. Intact but untrusted
// content is ok, with the reason that it is not trusted. STRICT; a blank
// artifact gives NULL.
KVG_SQL_FUNCTION(kvg_artifact_verify) {
  if (arg_is_blank(fcinfo, 0)) PG_RETURN_NULL();
  const Digest id = digest_arg(fcinfo, 0, "artifact");
  Spi spi;
  LoStore store(spi);
  require_readable(spi, id);
  const StoredArtifact row = store.require(id);
  std::string problem;
  try {
    // The reader hashes every byte for the trailer and the identity: one
    // pass, compared with the name below.
    auto src = store.get_unverified(id);
    const VerifiedArtifact art = verify_artifact(*src);
    if (art.identity != id)
      throw Error(ErrorCode::Corrupt, "artifact " + to_hex(id) + ": its bytes hash to " + to_hex(art.identity));
    if (auto column = catalog_disagreement(row, art, art.header.total_bytes()))
      problem = "artifact " + to_hex(id) + ": kvg.artifacts." + *column + " disagrees with the stored bytes";
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Corrupt && e.code() != ErrorCode::Unsupported) throw;
    problem = e.what();
  }
  std::optional<std::string> reason;
  if (!problem.empty()) {
    reason = problem;
  } else if (!trusted(row.provenance)) {
    // Intact bytes say nothing of who computed them (docs/security.md).
    reason = "artifact " + to_hex(id) + " is intact, but its provenance is " + provenance_name(row.provenance) +
             ": its KV is not known to be what this engine computes for its tokens";
  }
  const bool ok = problem.empty();
  return composite_result(fcinfo, {BoolGetDatum(ok), ok ? std::nullopt : ResultValue(text_result(to_hex(id))),
                                   reason ? ResultValue(text_result(*reason)) : std::nullopt});
}
