#include "extension/src/audit/audit.hpp"

#include "common/error.hpp"
#include "extension/src/audit/audit_forward.hpp"
#include "extension/src/audit/audit_row.hpp"
#include "extension/src/workers/writer/writer.hpp"
#include "extension/src/replica/replica_settings.hpp"
#include "extension/src/pg/sql_raise.hpp"
#include "extension/src/roles/standby.hpp"
#include "extension/src/roles/owner_rights.hpp"
#include "extension/src/spi/spi.hpp"
#include "extension/src/spi/sql_values.hpp"
#include "extension/src/audit/unaudited_warning.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/pg/postgres.hpp"
#include "storage/sha256.hpp"

namespace kvg::pg {

namespace {

// The audit row's insert, as kvg's writer runs it (workers/writer/
// writer_statements.hpp): registered while kvg.so loads, so that the writer
// and every caller know it by the same kind.
const writer::StatementKind kAuditRowStatement = writer::register_statement({
    .name = "audit row",
    .sql = audit_insert_statement(),
    .parameters = std::vector<writer::ParameterType>(audit_columns().size(), writer::ParameterType::Text),
    .refusal = "this call's audit row cannot be recorded",
    .refusal_hint = "The audit writer is a background worker of kvg (see kvg_audit_writers() and the server log); a "
                    "call is refused rather than answered without its audit row (docs/audit-chain.md).",
    .own_error_prefix = {},  // whatever failed it, the call is refused as unaudited (57V01)
});

// The (sub)transaction of the call, made to have an id, so pg_xact_status
// tells later whether it committed: a subtransaction's says 'aborted' once
// rolled back to its savepoint, and 'committed' once its top transaction
// commits. Its commit is flushed before the client hears of it, even when
// it wrote nothing else (PostgreSQL commits such a transaction
// asynchronously): otherwise a crash right after a delivered answer would
// leave its row saying 'aborted'.
std::string caller_xid() {
  const uint64_t xid = call([] {
    ForceSyncCommit();
    return U64FromFullTransactionId(GetCurrentFullTransactionId());
  });
  return std::to_string(xid);
}

}  // namespace

std::optional<int64_t> append_through_writer(const std::string& operation, const std::vector<SqlValue>& values) {
  try {
    return writer::submit(kAuditRowStatement, values);
  } catch (const writer::Failure& f) {
    if (!settings::allow_unaudited()) raise_sqlstate(f.sqlstate.c_str(), f.what(), f.hint);
    warn_unaudited(operation, f.what());
    return std::nullopt;
  }
}

std::optional<int64_t> audit_append(Spi&, const AuditRecord& r) {
  // A standby's transaction means nothing on the primary: its row names none.
  const bool standby = on_standby();
  const AuditCaller caller{calling_role(), standby ? std::nullopt : std::optional<std::string>(caller_xid()),
                           session_role()};
  const std::vector<SqlValue> values = audit_row_values(r, caller);
  if (standby) return append_on_primary(r.operation, values);
  return append_through_writer(r.operation, values);
}

void audit_preflight() {
  if (on_standby()) {
    check_primary_reachable();
    return;
  }
  try {
    writer::ensure_running(kAuditRowStatement);
  } catch (const writer::Failure& f) {
    if (!settings::allow_unaudited()) raise_sqlstate(f.sqlstate.c_str(), f.what(), f.hint);
  }
}

}  // namespace kvg::pg

using namespace kvg;
using namespace kvg::pg;

// kvg_audit_verify(after_seq bigint, after_hash text, OUT ok, OUT first_bad,
// OUT reason), the shape of every verify function (docs/sql.md):
// kvg.audit_first_bad() with the owner's rights, whatever rows the caller may
// read; first_bad is the seq of the first chain position that does not
// verify. Both checkpoint arguments NULL: the whole chain; both given: the
// rows after the checkpoint only.
KVG_SQL_FUNCTION(kvg_audit_verify) {
  SqlValue after_seq = "0", after_hash = std::string(64, '0');
  if (!arg_is_null(fcinfo, 0) || !arg_is_null(fcinfo, 1)) {
    if (arg_is_null(fcinfo, 0) || arg_is_null(fcinfo, 1))
      throw Error(ErrorCode::InvalidArgument,
                  "a checkpoint is a row and its row_hash: give both after_seq and after_hash, or neither");
    const int64 seq = PG_GETARG_INT64(0);
    const std::string hash = text_arg(fcinfo, 1);
    if (seq < 1) throw Error(ErrorCode::InvalidArgument, "after_seq must be at least 1 (the chain begins at seq 1)");
    const std::optional<Digest> digest = digest_from_hex(hash);
    if (!digest)
      throw Error(ErrorCode::InvalidArgument, "after_hash is not a 64-character hex SHA-256: " + hash.substr(0, 80));
    after_seq = std::to_string(seq);
    after_hash = to_hex(*digest);  // row hashes are stored in lower case
  }
  Spi spi;
  OwnerRights owner;
  const auto rows = spi.run("SELECT seq::text, reason FROM kvg.audit_first_bad($1::bigint, $2)", {after_seq, after_hash});
  if (rows.empty()) return composite_result(fcinfo, {BoolGetDatum(true), std::nullopt, std::nullopt});
  const std::optional<std::string>& seq = rows.at(0).at(0);
  const std::optional<std::string>& reason = rows.at(0).at(1);
  return composite_result(fcinfo, {BoolGetDatum(false),
                                   seq ? ResultValue(Int64GetDatum(std::stoll(*seq))) : std::nullopt,
                                   text_result(reason.value_or("the audit chain does not verify"))});
}
