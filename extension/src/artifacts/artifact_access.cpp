#include "extension/src/artifacts/artifact_access.hpp"

#include <string>
#include <vector>

#include "extension/src/roles/owner_rights.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/spi/spi.hpp"
#include "extension/src/pg/sql_raise.hpp"
#include "extension/src/spi/sql_values.hpp"
#include "extension/src/roles/standby.hpp"
#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "access/xact.h"
#include "utils/snapmgr.h"
}

namespace kvg::pg {

bool caller_reads_every_artifact(Spi& spi) {
  // pg_has_role is true of every role for a superuser.
  const auto rows = spi.run(
      "SELECT pg_catalog.pg_has_role(current_user, 'kvg_auditor', 'USAGE') "
      "OR pg_catalog.pg_has_role(current_user, n.nspowner, 'USAGE') "
      "FROM pg_catalog.pg_namespace n WHERE n.nspname = 'kvg'");
  return rows.at(0).at(0) == SqlValue("t");
}

void require_readable(Spi& spi, const Digest& leaf) {
  if (caller_reads_every_artifact(spi)) return;
  const std::string hex = to_hex(leaf);
  // The named artifact itself first (a claim of the session user's, or
  // published), then every link above it. Latest state, like every read of
  // the catalog (lo_store.hpp): it includes the claims this transaction made
  // in earlier statements.
  OwnerRights owner;
  const auto rows = spi.run_latest(
      "WITH RECURSIVE chain AS (SELECT a.sha256, a.parent_sha256 FROM kvg.artifacts a WHERE a.sha256 = $1 "
      "UNION SELECT a.sha256, a.parent_sha256 FROM kvg.artifacts a JOIN chain c ON a.sha256 = c.parent_sha256) "
      "SELECT kvg.artifact_readable($1) AND NOT EXISTS (SELECT FROM chain c WHERE NOT kvg.artifact_readable(c.sha256))",
      {hex});
  if (rows.at(0).at(0) == SqlValue("t")) return;
  raise_sqlstate("42501",
                 "artifact " + hex + " is not stored, or is not yours to read" +
                     (on_standby() ? " (this standby has replayed the primary's WAL up to " + replayed_up_to() + ")"
                                   : ""),
                 "A user reads the artifacts its own calls stored and those the shared library publishes; "
                 "kvg_auditor reads all (docs/security.md).");
}

}  // namespace kvg::pg

using namespace kvg;
using namespace kvg::pg;

// kvg.artifact_published(artifact text) returns boolean: whether a library
// entry names the artifact or a continuation of it (it is then in that
// entry's chain, which every asker grafts, so every user may read it). The
// policy artifacts_own_or_published calls it for each row that is not the
// reader's own. Read with the owner's rights, to whom the policies do not
// apply, so that the policy's own query does not apply the policy again;
// under the latest committed state, like every read of the catalog
// (lo_store.hpp). The walk goes down from the artifact, one level of
// continuations at a time, and stops at the first one an entry names: an
// entry's own artifact costs one index probe, a chain's root (a library
// template) about one level.
namespace {

constexpr const char* kPublishedSql =
    "WITH RECURSIVE d(sha256) AS (SELECT $1::text "
    "UNION SELECT a.sha256 FROM kvg.artifacts a JOIN d ON a.parent_sha256 = d.sha256) "
    "SELECT EXISTS (SELECT FROM d WHERE EXISTS (SELECT FROM kvg.knowledge k WHERE k.artifact_sha256 = d.sha256))";

// The policy asks once per row a reader does not own, so the statement is
// planned once per backend (a saved plan: PostgreSQL plans it again after
// DDL on what it reads) rather than once per row, which costs seven times
// the walk itself.
bool published(const std::string& id) {
  static SPIPlanPtr plan = nullptr;
  Spi spi;
  OwnerRights owner;
  return call([&] {
    if (!plan) {
      Oid types[1] = {TEXTOID};
      SPIPlanPtr prepared = SPI_prepare(kPublishedSql, 1, types);
      if (!prepared || SPI_keepplan(prepared) != 0) elog(ERROR, "kvg: cannot prepare the publication check");
      plan = prepared;
    }
    Datum arg = PointerGetDatum(cstring_to_text_with_len(id.data(), static_cast<int>(id.size())));
    CommandCounterIncrement();  // as Spi::run_latest: this transaction's own writes count
    const int rc = SPI_execute_snapshot(plan, &arg, nullptr, GetLatestSnapshot(), InvalidSnapshot, true, false, 1);
    if (rc != SPI_OK_SELECT || SPI_processed != 1) elog(ERROR, "kvg: the publication check failed");
    bool is_null = true;
    const Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &is_null);
    return !is_null && DatumGetBool(d);
  });
}

}  // namespace

KVG_SQL_FUNCTION(kvg_artifact_published) { return BoolGetDatum(published(text_arg(fcinfo, 0))); }
