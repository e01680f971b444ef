// The primary's side of audit forwarding (audit_forward.hpp is the
// standby's): kvg.audit_append_forwarded(row jsonb) appends the row of a
// call a hot standby answered, as a local call's row would be appended.
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "extension/src/audit/audit.hpp"
#include "extension/src/audit/audit_row.hpp"
#include "extension/src/roles/owner_rights.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/spi/spi.hpp"
#include "extension/src/pg/sql_raise.hpp"
#include "extension/src/spi/sql_values.hpp"
#include "extension/src/roles/standby.hpp"
#include "storage/sha256.hpp"
#include "extension/src/pg/postgres.hpp"

using namespace kvg;
using namespace kvg::pg;

namespace {

// What only a primary does; a row saying a standby did it is refused.
bool primary_only(const std::string& operation) {
  for (const char* op : {"import", "capture", "learn", "solve"})
    if (operation == op) return true;
  return false;
}

// Fields of the row that are no audit column, comma-separated (empty: none).
// Refuses a row that is not a JSON object.
std::string unknown_fields(Spi& spi, const std::string& row) {
  std::string known = "{";
  for (const AuditColumn& c : audit_columns()) known += std::string(known.size() > 1 ? "," : "") + c.name;
  known += "}";
  const auto rows = spi.run("SELECT pg_catalog.jsonb_typeof($1::jsonb) = 'object'", {row});
  if (rows.at(0).at(0) != SqlValue("t"))
    throw Error(ErrorCode::InvalidArgument, "the forwarded row is not a JSON object of audit columns");
  const auto unknown = spi.run(
      "SELECT pg_catalog.string_agg(k, ', ' ORDER BY k) FROM pg_catalog.jsonb_object_keys($1::jsonb) k "
      "WHERE k <> ALL ($2::text[])",
      {row, known});
  return unknown.at(0).at(0).value_or("");
}

// The row's fields in audit_columns() order, each cast to its column's type
// (a value of the wrong type is that type's error) and back to text.
std::vector<SqlValue> row_values(Spi& spi, const std::string& row) {
  std::string sql = "SELECT ";
  size_t i = 0;
  for (const AuditColumn& c : audit_columns())
    sql += std::string(i++ ? ", " : "") + "((r->>'" + c.name + "')::" + c.sql_type + ")::text";
  sql += " FROM (SELECT $1::jsonb AS r) s";
  return spi.run(sql.c_str(), {row}).at(0);
}

void require_role(const SqlValue& name, const char* field) {
  if (name && !role_oid(*name))
    throw Error(ErrorCode::InvalidArgument, std::string(field) + " \"" + *name + "\" does not exist here");
}

// The bytes a '\x' hex text stands for.
std::string unhex(const std::string& text) {
  std::string bytes;
  for (size_t i = 2; i + 1 < text.size(); i += 2) bytes.push_back(char(std::stoi(text.substr(i, 2), nullptr, 16)));
  return bytes;
}

}  // namespace

// kvg.audit_append_forwarded(row jsonb) returns table(id, seq, row_hash): on
// the primary, the audit row of a call a standby answered, one field per
// column of kvg.audit_insert (audit_row.hpp), inserted as a local call's row
// is (by the audit writer, committed before this returns), so that the
// standby learns its place. For members of kvg_audit_writer only.
KVG_SQL_FUNCTION(kvg_audit_append_forwarded) {
  if (on_standby())
    raise_sqlstate("25006", "kvg.audit_append_forwarded: this server is itself a standby",
                   "kvg.audit_conninfo must lead to the primary; target_session_attrs=read-write finds it.");
  require_arg(fcinfo, 0, "row");
  const std::string row = jsonb_text_arg(fcinfo, 0);
  Spi spi;
  if (const std::string unknown = unknown_fields(spi, row); !unknown.empty())
    throw Error(ErrorCode::InvalidArgument, "the forwarded row has fields that are no audit column: " + unknown);
  const std::vector<SqlValue> values = row_values(spi, row);
  const SqlValue& operation = audit_value(values, "operation");
  if (!operation || !audit_value(values, "role"))
    throw Error(ErrorCode::InvalidArgument, "a forwarded row names its operation and role");
  if (primary_only(*operation))
    throw Error(ErrorCode::InvalidArgument, "a standby does not " + *operation + ": such a row is not forwarded");
  require_role(audit_value(values, "role"), "role");
  require_role(audit_value(values, "session_role"), "session_role");
  if (audit_value(values, "caller_xid"))
    throw Error(ErrorCode::InvalidArgument,
                "a forwarded row names no caller_xid: a standby's transaction means nothing on the primary");
  // The row must say what the standby returned: its output hash covers the
  // output it carries (the raw bytes when they differ from the text).
  const SqlValue& bytes = audit_value(values, "output_bytes");
  const SqlValue& text = audit_value(values, "output_text");
  if (bytes || text) {
    const std::string raw = bytes ? unhex(*bytes) : *text;
    if (audit_value(values, "output_sha256") != to_hex(sha256(std::string_view(raw))))
      throw Error(ErrorCode::InvalidArgument, "output_sha256 is not the SHA-256 of the forwarded output");
  }

  // The same path as a local call's row: committed by this database's
  // audit writer before this returns.
  const std::optional<int64_t> appended = append_through_writer(*operation, values);
  if (!appended) throw Error(ErrorCode::Internal, "the forwarded audit row was not recorded");
  const int64_t id = *appended;
  OwnerRights owner;  // a kvg_audit_writer reads no audit rows itself
  const auto rows = spi.run("SELECT seq, row_hash FROM kvg.audit WHERE id = $1::bigint", {std::to_string(id)});
  if (rows.size() != 1 || !rows[0].at(0) || !rows[0].at(1))
    throw Error(ErrorCode::Internal, "the forwarded audit row " + std::to_string(id) + " was not linked");
  return_single_row(fcinfo, {Int64GetDatum(id), Int64GetDatum(std::stoll(*rows[0][0])), text_result(*rows[0][1])});
  return Datum(0);
}
