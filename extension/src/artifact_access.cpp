#include "extension/src/artifact_access.hpp"

#include <string>
#include <vector>

#include "extension/src/owner_rights.hpp"
#include "extension/src/pg_boundary.hpp"
#include "extension/src/spi.hpp"
#include "extension/src/sql_raise.hpp"
#include "extension/src/sql_values.hpp"
#include "extension/src/standby.hpp"
#include "extension/src/postgres.hpp"

namespace kvg::pg {

void require_readable(Spi& spi, const Digest& leaf) {
  const std::string hex = to_hex(leaf);
  // The walk sees only the rows the policies give the caller, so it reaches
  // the chain's root only when every link is readable: a continuation of
  // someone else's artifact is as private as that artifact. Latest state,
  // like every read of the catalog (lo_store.hpp): it includes the claims
  // this transaction made in earlier statements.
  const auto rows = spi.run_latest(
      "WITH RECURSIVE chain AS (SELECT a.sha256, a.parent_sha256 FROM kvg.artifacts a WHERE a.sha256 = $1 "
      "UNION SELECT a.sha256, a.parent_sha256 FROM kvg.artifacts a JOIN chain c ON a.sha256 = c.parent_sha256) "
      "SELECT EXISTS (SELECT FROM chain c WHERE c.parent_sha256 IS NULL), "
      "pg_catalog.row_security_active('kvg.artifacts'::pg_catalog.regclass)",
      {hex});
  // Readable; or the caller is not subject to the policies, and the call
  // goes on to say "is not stored" (42704) where it reads an unknown one.
  if (rows.at(0).at(0) == SqlValue("t") || rows.at(0).at(1) != SqlValue("t")) return;
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

// kvg.published_artifacts() returns table(sha256 text, knowledge_id
// bigint): the artifacts that library entries name and every ancestor in
// their chains, which every user may read (the policy
// artifacts_own_or_published calls it), each with an entry whose chain holds
// it (an artifact in several chains has several rows). Read with the
// owner's rights, to whom the policies do not apply, so that the policy's
// own query does not apply the policy again; under the latest committed
// state, like every read of the catalog (lo_store.hpp).
KVG_SQL_FUNCTION(kvg_published_artifacts) {
  Spi spi;
  std::vector<std::vector<ResultValue>> rows;
  {
    OwnerRights owner;
    for (const SqlRow& r : spi.run_latest(
             "WITH RECURSIVE chain(sha256, knowledge_id) AS (SELECT k.artifact_sha256, k.id FROM kvg.knowledge k "
             "UNION SELECT a.parent_sha256, c.knowledge_id FROM kvg.artifacts a JOIN chain c ON a.sha256 = c.sha256 "
             "WHERE a.parent_sha256 IS NOT NULL) SELECT c.sha256, c.knowledge_id FROM chain c"))
      rows.push_back({text_result(r.at(0).value()), Int64GetDatum(std::stoll(r.at(1).value()))});
  }
  return_rows(fcinfo, rows);
  return Datum(0);
}
