// SQL functions over stored artifacts that need no engine: import, export and
// verify. Every byte is checked by storage's codec; nothing here parses.
#include <string>

#include "common/error.hpp"
#include "extension/src/audit.hpp"
#include "extension/src/lo_store.hpp"
#include "extension/src/pg_boundary.hpp"
#include "extension/src/spi.hpp"
#include "extension/src/sql_values.hpp"
#include "storage/artifact_format.hpp"
#include "extension/src/postgres.hpp"

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

// kvg_import(data bytea) returns text: validates the whole artifact (header
// rules, trailer, identity) before anything is written, stores it once, and
// records the import in the audit trail.
KVG_SQL_FUNCTION(kvg_import) {
  const auto bytes = bytea_arg(fcinfo, 0);
  const VerifiedArtifact art = verify_artifact(bytes);
  Spi spi;
  LoStore store(spi);
  MemorySource src(bytes);
  const Digest id = store.put(src, meta_from_header(art.header));
  if (id != art.identity) throw Error(ErrorCode::Internal, "store and codec disagree on the artifact's SHA-256");
  AuditRecord audit;
  audit.operation = "import";
  audit.model_fingerprint = to_hex(art.header.model_fingerprint);
  audit.recipe = art.header.recipe;
  audit.artifact_sha256 = to_hex(id);
  audit_append(spi, audit);
  return text_result(to_hex(id));
}

// kvg_export(sha256 text) returns bytea: the stored bytes, hash-checked on
// the way out (an object that no longer matches its identity is an error).
KVG_SQL_FUNCTION(kvg_export) {
  const Digest id = digest_arg(fcinfo, 0, "sha256");
  Spi spi;
  LoStore store(spi);
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
  return result;
}

// kvg_artifact_verify(sha256 text) returns bool: re-reads the large object,
// re-hashes it, re-validates header and trailer and compares the catalog row.
// false (with a NOTICE saying why) for damaged content; an unknown hash is an
// error, not false.
KVG_SQL_FUNCTION(kvg_artifact_verify) {
  const Digest id = digest_arg(fcinfo, 0, "sha256");
  Spi spi;
  LoStore store(spi);
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
  if (problem.empty()) PG_RETURN_BOOL(true);
  notice(problem);
  PG_RETURN_BOOL(false);
}
