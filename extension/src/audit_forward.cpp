#include "extension/src/audit_forward.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "extension/src/audit.hpp"
#include "extension/src/owner_rights.hpp"
#include "extension/src/pg_boundary.hpp"
#include "extension/src/primary_link.hpp"
#include "extension/src/settings.hpp"
#include "extension/src/sql_raise.hpp"
#include "extension/src/sql_values.hpp"
#include "extension/src/standby.hpp"
#include "storage/sha256.hpp"
#include "extension/src/postgres.hpp"

namespace kvg::pg {

namespace {

using primary_link::Failure;

// audit_values' order and casts, as kvg.audit_insert takes them locally.
constexpr const char* kAppendOnPrimary =
    "SELECT id, seq, row_hash FROM kvg.audit_append_forwarded($1, $2, $3, $4, $5, $6, $7, $8, $9::integer, "
    "$10::integer, $11::integer, $12, $13::bigint, $14::boolean, $15, $16::bigint, $17::bigint, $18::bigint, "
    "$19::boolean, pg_catalog.decode($20, 'hex'))";

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
    row = primary_link::run_one_row(kAppendOnPrimary, values);
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

using namespace kvg;
using namespace kvg::pg;

namespace {

// What only a primary does; a row saying a standby did it is refused.
bool primary_only(const std::string& operation) {
  for (const char* op : {"import", "capture", "learn", "solve"})
    if (operation == op) return true;
  return false;
}

std::optional<std::string> optional_text(FunctionCallInfo fcinfo, int n) {
  return arg_is_null(fcinfo, n) ? std::nullopt : std::optional<std::string>(text_arg(fcinfo, n));
}

template <typename T>
std::optional<T> optional_value(FunctionCallInfo fcinfo, int n, T value) {
  return arg_is_null(fcinfo, n) ? std::nullopt : std::optional<T>(value);
}

}  // namespace

// kvg.audit_append_forwarded(operation, role, ..., output_bytes) returns
// table(id, seq, row_hash): on the primary, the audit row of a call a standby
// answered (the arguments of kvg.audit_insert, role as text), inserted as a
// local call's row would be (by the audit writer, committed before this
// returns), so that the standby learns its place. For members of kvg_audit_writer only.
KVG_SQL_FUNCTION(kvg_audit_append_forwarded) {
  if (on_standby())
    raise_sqlstate("25006", "kvg.audit_append_forwarded: this server is itself a standby",
                   "kvg.audit_conninfo must lead to the primary; target_session_attrs=read-write finds it.");
  require_arg(fcinfo, 0, "operation");
  require_arg(fcinfo, 1, "role");
  AuditRecord r;
  r.operation = text_arg(fcinfo, 0);
  const std::string role = text_arg(fcinfo, 1);
  if (primary_only(r.operation))
    throw Error(ErrorCode::InvalidArgument, "a standby does not " + r.operation + ": such a row is not forwarded");
  if (!role_oid(role)) throw Error(ErrorCode::InvalidArgument, "role \"" + role + "\" does not exist here");
  r.model_fingerprint = optional_text(fcinfo, 2);
  r.recipe = optional_text(fcinfo, 3);
  r.input_sha256 = optional_text(fcinfo, 4);
  r.artifact_sha256 = optional_text(fcinfo, 5);
  r.output_sha256 = optional_text(fcinfo, 6);
  r.logits_sha256 = optional_text(fcinfo, 7);
  r.tokens_in = optional_value<int32_t>(fcinfo, 8, PG_GETARG_INT32(8));
  r.tokens_out = optional_value<int32_t>(fcinfo, 9, PG_GETARG_INT32(9));
  r.tokens_grafted = optional_value<int32_t>(fcinfo, 10, PG_GETARG_INT32(10));
  r.mode = optional_text(fcinfo, 11);
  r.knowledge_id = optional_value<int64_t>(fcinfo, 12, PG_GETARG_INT64(12));
  r.verified = optional_value<bool>(fcinfo, 13, PG_GETARG_BOOL(13));
  r.output_text = optional_text(fcinfo, 14);
  r.graft_us = optional_value<int64_t>(fcinfo, 15, PG_GETARG_INT64(15));
  r.prefill_us = optional_value<int64_t>(fcinfo, 16, PG_GETARG_INT64(16));
  r.decode_us = optional_value<int64_t>(fcinfo, 17, PG_GETARG_INT64(17));
  r.kv_proven = optional_value<bool>(fcinfo, 18, PG_GETARG_BOOL(18));
  if (!arg_is_null(fcinfo, 19)) {
    const auto bytes = bytea_arg(fcinfo, 19);
    r.output_bytes = std::string(bytes.begin(), bytes.end());
  }
  // The row must say what the standby returned: its output hash covers the
  // output it carries (the raw bytes when they differ from the text).
  if (r.output_text || r.output_bytes) {
    const std::string& raw = r.output_bytes ? *r.output_bytes : *r.output_text;
    if (r.output_sha256 != to_hex(sha256(std::string_view(raw))))
      throw Error(ErrorCode::InvalidArgument, "output_sha256 is not the SHA-256 of the forwarded output");
  }

  // The same path as a local call's row: committed by this database's
  // audit writer before this returns (the standby's transaction id means
  // nothing here: caller_xid stays NULL).
  const std::optional<int64_t> appended = append_through_writer(r.operation, audit_values(r, role), nullptr);
  if (!appended) throw Error(ErrorCode::Internal, "the forwarded audit row was not recorded");
  const int64_t id = *appended;
  Spi spi;
  OwnerRights owner;  // a kvg_audit_writer reads no audit rows itself
  const auto rows = spi.run("SELECT seq, row_hash FROM kvg.audit WHERE id = $1::bigint", {std::to_string(id)});
  if (rows.size() != 1 || !rows[0].at(0) || !rows[0].at(1))
    throw Error(ErrorCode::Internal, "the forwarded audit row " + std::to_string(id) + " was not linked");
  return_single_row(fcinfo, {Int64GetDatum(id), Int64GetDatum(std::stoll(*rows[0][0])), text_result(*rows[0][1])});
  return Datum(0);
}
