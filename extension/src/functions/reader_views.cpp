// The rows behind the views through which a kvg_user reads tables that
// hold other users' rows too: kvg.readable_artifacts (kvg.artifacts),
// kvg.readable_audit (kvg.audit) and kvg.storage_usage
// (kvg.storage_charges). Users hold no privilege on those
// tables. A row-level policy or a view's WHERE would hide other users'
// rows but not their number: EXPLAIN ANALYZE reports the rows a filter
// removed, and a reader's leakproof predicate runs below the filter as an
// index condition. Rows that come out of a C function show in a reader's
// plan as a function scan of what the function returned, nothing else
// (docs/security.md, "No view of other users' rows"). SECURITY DEFINER done
// in C, as everywhere in kvg: the rule is decided for the calling role,
// then read with the owner's rights.
#include <string>

#include "extension/src/artifacts/artifact_access.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/roles/owner_rights.hpp"
#include "extension/src/spi/spi.hpp"
#include "extension/src/pg/postgres.hpp"

using namespace kvg;
using namespace kvg::pg;

namespace {

// Runs `sql` with the owner's rights and returns its rows as the function's.
// The statement gets the caller's standing as $1 (whether it reads every
// row: a superuser, kvg_auditor, the schema's owner) and $2 (the calling
// role), both decided before the switch.
Datum rows_for_caller(FunctionCallInfo fcinfo, const char* sql) {
  Spi spi;
  const std::string reads_all = caller_reads_every_artifact(spi) ? "t" : "f";
  const std::string caller = calling_role();
  OwnerRights owner;
  spi.return_rows_of(fcinfo, sql, {reads_all, caller});
  return Datum(0);
}

}  // namespace

// kvg.readable_artifact_rows() returns SETOF kvg.artifacts: the rows the
// caller may read (kvg.artifact_readable, or every row), under the caller's
// snapshot, like any read of a table.
KVG_SQL_FUNCTION(kvg_readable_artifact_rows) {
  return rows_for_caller(fcinfo,
                         "SELECT a.* FROM kvg.artifacts a "
                         "WHERE $1::boolean OR kvg.artifact_readable(a.sha256) "
                         "ORDER BY a.sha256");
}

// kvg.readable_audit_rows() returns SETOF kvg.audit: the rows of the
// caller's own calls (role: the calling role, as the call recorded it), or
// every row, in chain order.
KVG_SQL_FUNCTION(kvg_readable_audit_rows) {
  return rows_for_caller(fcinfo, "SELECT a.* FROM kvg.audit a WHERE $1::boolean OR a.role = $2::name ORDER BY a.seq");
}

// kvg.storage_usage_rows() returns (role, artifacts, bytes): the caller's
// own charges (its session user's: what it is charged), or every role's.
KVG_SQL_FUNCTION(kvg_storage_usage_rows) {
  return rows_for_caller(fcinfo,
                         "SELECT c.role, count(*), sum(c.bytes)::bigint FROM kvg.storage_charges c "
                         "WHERE $1::boolean OR c.role = session_user "
                         "GROUP BY c.role ORDER BY c.role");
}
