#include "extension/src/audit/audit_row.hpp"

#include <array>
#include <charconv>

#include "common/error.hpp"
#include "engine/output_text.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/spi/sql_values.hpp"
#include "storage/sha256.hpp"
#include "extension/src/pg/postgres.hpp"

namespace kvg::pg {

namespace {

// Change this with kvg.audit_insert (and the table, the row hash and the
// manifest: docs/audit-chain.md says where).
constexpr std::array<AuditColumn, kAuditColumnCount> kColumns{{
    {"operation", "text"},
    {"role", "name"},
    {"model_fingerprint", "text"},
    {"recipe", "text"},
    {"input_sha256", "text"},
    {"artifact_sha256", "text"},
    {"output_sha256", "text"},
    {"logits_sha256", "text"},
    {"tokens_in", "integer"},
    {"tokens_out", "integer"},
    {"tokens_grafted", "integer"},
    {"mode", "text"},
    {"knowledge_id", "bigint"},
    {"verified", "boolean"},
    {"output_text", "text"},
    {"graft_us", "bigint"},
    {"prefill_us", "bigint"},
    {"decode_us", "bigint"},
    {"kv_proven", "boolean"},
    {"output_bytes", "bytea"},
    {"caller_xid", "xid8"},
    {"session_role", "name"},
    {"temperature", "double precision"},
    {"top_p", "double precision"},
    {"seed", "bigint"},
    {"max_tokens", "integer"},
    {"stop_reason", "text"},
    {"prompt_tokens_sha256", "text"},
    {"template_sha256", "text"},
    {"artifact_chain", "text"},
    // Not a column of the row: kvg.audit_insert keeps it in
    // kvg.knowledge_templates, by template_sha256.
    {"template_text", "text"},
}};

template <typename N>
SqlValue number(const std::optional<N>& n) {
  return n ? SqlValue(std::to_string(*n)) : std::nullopt;
}

SqlValue boolean(const std::optional<bool>& b) { return b ? SqlValue(*b ? "true" : "false") : std::nullopt; }

// The shortest decimal that reads back as the same float.
SqlValue real(const std::optional<float>& x) {
  if (!x) return std::nullopt;
  char text[64];
  const auto end = std::to_chars(text, text + sizeof(text), *x).ptr;
  return SqlValue(std::string(text, end));
}

SqlValue bytea_hex(const std::optional<std::string>& bytes) {
  return bytes ? SqlValue("\\x" + to_hex(std::string_view(*bytes))) : std::nullopt;
}

}  // namespace

void AuditRecord::set_output(const std::string& raw) {
  output_text = kvg::output_text(raw);
  output_bytes = *output_text == raw ? std::nullopt : std::optional<std::string>(raw);
  output_sha256 = to_hex(sha256(std::string_view(raw)));
}

std::span<const AuditColumn> audit_columns() { return kColumns; }

std::vector<SqlValue> audit_row_values(const AuditRecord& r, const AuditCaller& c) {
  std::vector<SqlValue> values{
      r.operation,           c.role,           r.model_fingerprint,   r.recipe,
      r.input_sha256,        r.artifact_sha256, r.output_sha256,      r.logits_sha256,
      number(r.tokens_in),   number(r.tokens_out), number(r.tokens_grafted), r.mode,
      number(r.knowledge_id), boolean(r.verified), r.output_text,     number(r.graft_us),
      number(r.prefill_us),  number(r.decode_us), boolean(r.kv_proven), bytea_hex(r.output_bytes),
      c.xid,                 c.session_role,   real(r.temperature),   real(r.top_p),
      number(r.seed),        number(r.max_tokens), r.stop_reason,     r.prompt_tokens_sha256,
      r.template_sha256,     r.artifact_chain,     r.template_text};
  if (values.size() != kColumns.size())
    throw Error(ErrorCode::Internal, "audit_row_values does not give one value per audit column");
  return values;
}

std::string audit_insert_statement() {
  std::string sql = "SELECT kvg.audit_insert(";
  for (size_t i = 0; i < kColumns.size(); ++i)
    sql += (i ? ", $" : "$") + std::to_string(i + 1) + "::" + kColumns[i].sql_type;
  return sql + ")";
}

std::string audit_row_json_expression() {
  std::string sql = "pg_catalog.jsonb_build_object(";
  for (size_t i = 0; i < kColumns.size(); ++i)
    sql += std::string(i ? ", '" : "'") + kColumns[i].name + "', $" + std::to_string(i + 1) + "::text";
  return sql + ")";
}

const SqlValue& audit_value(const std::vector<SqlValue>& values, std::string_view name) {
  for (size_t i = 0; i < kColumns.size() && i < values.size(); ++i)
    if (name == kColumns[i].name) return values[i];
  throw Error(ErrorCode::Internal, "no audit column \"" + std::string(name) + "\"");
}

}  // namespace kvg::pg

using namespace kvg::pg;

// kvg.audit_columns(): the column table, for the test that holds it to
// kvg.audit_insert's signature and for whoever builds a forwarded row.
KVG_SQL_FUNCTION(kvg_audit_columns) {
  std::vector<std::vector<ResultValue>> rows;
  int position = 0;
  for (const AuditColumn& c : audit_columns())
    rows.push_back({Int32GetDatum(++position), text_result(c.name), text_result(c.sql_type)});
  return_rows(fcinfo, rows);
  return Datum(0);
}
