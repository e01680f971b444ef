#include "extension/src/audit/audit_forward.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "extension/src/audit/audit_row.hpp"
#include "extension/src/roles/owner_rights.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/replica/primary_link.hpp"
#include "extension/src/replica/replica_settings.hpp"
#include "extension/src/audit/unaudited_warning.hpp"
#include "extension/src/pg/sql_raise.hpp"
#include "extension/src/spi/sql_values.hpp"
#include "extension/src/roles/standby.hpp"
#include "storage/sha256.hpp"
#include "extension/src/pg/postgres.hpp"

namespace kvg::pg {

namespace {

using primary_link::Failure;

// The row as one jsonb value (audit_row.hpp), fields named by their columns.
std::string append_on_primary_statement() {
  return "SELECT id, seq, row_hash FROM kvg.audit_append_forwarded(" + audit_row_json_expression() + ")";
}

constexpr const char* kWhyRefused =
    "This server is a hot standby: every call it answers is audited on the primary (kvg.audit_conninfo), and "
    "what cannot be audited is not returned.";

// Not reachable, not configured, or lost on the way: what kvg.allow_unaudited
// may let through. A primary that refused the row is never overridden.
bool may_go_unaudited(const Failure& f) {
  return f.kind != Failure::Kind::Rejected && settings::allow_unaudited();
}

[[noreturn]] void refuse(const Failure& f, const std::string& what) {
  std::string detail = kWhyRefused;
  if (!f.detail.empty()) detail += " The primary says: " + f.detail;
  raise_sqlstate(f.sqlstate.c_str(), "kvg: " + what + ": " + f.what(),
                 f.hint.empty() ? "Check that the primary is up and that kvg.audit_conninfo reaches it "
                                  "(docs/scale-out.md)."
                                : f.hint,
                 detail);
}

}  // namespace

std::optional<int64_t> append_on_primary(const std::string& operation, const std::vector<SqlValue>& values) {
  std::vector<SqlValue> row;
  try {
    row = primary_link::run_one_row(append_on_primary_statement().c_str(), values);
  } catch (const Failure& f) {
    if (!may_go_unaudited(f))
      refuse(f, "the audit row of this " + operation + " call could not be recorded on the primary, so its result "
                "is not returned");
    warn_unaudited(operation, f.what());
    return std::nullopt;
  }
  if (row.size() != 3 || !row[0] || !row[1] || !row[2])
    throw Error(ErrorCode::Internal, "kvg.audit_append_forwarded returned no id, seq or row_hash");
  const std::string message = "kvg: audit row " + *row[0] + " recorded on the primary at seq " + *row[1] +
                              " (row_hash " + *row[2] + ")";
  call([&] { elog(DEBUG1, "%s", message.c_str()); });
  return std::stoll(*row[0]);
}

void check_primary_reachable() {
  if (settings::allow_unaudited()) return;
  try {
    primary_link::ensure_connected();
  } catch (const Failure& f) {
    refuse(f, "this standby cannot reach the primary to record the call's audit row, so it refuses the call");
  }
}

}  // namespace kvg::pg
