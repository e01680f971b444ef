// One audit row as the C++ side knows it, and the one table of its columns
// (docs/audit-chain.md): the order and SQL type of kvg.audit_insert's
// parameters. The writer's insert statement, the row a standby forwards and
// the values a call queues are all made from that table, so a column is
// added in one place here (and in the SQL script, which
// tests/pgtap/18_audit_columns.sql checks against kvg.audit_columns()).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "extension/src/spi/spi.hpp"

namespace kvg::pg {

struct AuditRecord {
  // "import", "capture", "generate", "graft_check", "learn", "solve", "answer", "chat", "export"
  std::string operation;
  std::optional<std::string> model_fingerprint;
  std::optional<std::string> recipe;
  std::optional<std::string> input_sha256;     // of the prompt / input bytes / question
  std::optional<std::string> artifact_sha256;  // the artifact used or produced
  std::optional<std::string> output_sha256;    // of the output's raw bytes
  std::optional<std::string> logits_sha256;
  std::optional<int32_t> tokens_in;            // prompt tokens
  std::optional<int32_t> tokens_out;           // decoded tokens
  std::optional<int32_t> tokens_grafted;       // prompt tokens whose KV was grafted, not computed
  std::optional<std::string> mode;             // answers: "recurring", "transfer", "cold"
  std::optional<int64_t> knowledge_id;
  std::optional<bool> verified;
  std::optional<std::string> output_text;      // the output as text (engine/output_text.hpp)
  // The raw bytes, only when they are not exactly output_text's UTF-8 (the
  // model emitted bytes that are not UTF-8, or NUL): docs/output-bytes.md.
  std::optional<std::string> output_bytes;
  std::optional<int64_t> graft_us, prefill_us, decode_us;
  // Every KV the call grafted or stored is known to be what this engine
  // computes for its tokens (docs/security.md).
  std::optional<bool> kv_proven;
  // What the output depends on beyond the above (kvg-audit-v4): how it was
  // decoded, the laid-out prompt's tokens, the template of a flywheel
  // prompt, and the artifacts grafted (root first, comma-separated).
  // As the engine used them (floats); the row keeps their shortest decimal,
  // which reads back as the same float.
  std::optional<float> temperature, top_p;
  std::optional<int64_t> seed;
  std::optional<int32_t> max_tokens;
  std::optional<std::string> stop_reason;  // "eos", "max_tokens", "stop"
  std::optional<std::string> prompt_tokens_sha256;
  std::optional<std::string> template_sha256;
  std::optional<std::string> artifact_chain;
  // The template's text (template_sha256 is its hash), recorded beside the
  // row in kvg.knowledge_templates rather than in it.
  std::optional<std::string> template_text;

  // Sets output_text, output_bytes and output_sha256 (of the raw bytes) together
  // from what the model produced.
  void set_output(const std::string& raw);
};

// Who asked, as the row names it: the calling role, the caller's
// (sub)transaction (NULL for a row a standby forwarded: its transaction
// means nothing on the primary) and the session's user.
struct AuditCaller {
  std::string role;
  std::optional<std::string> xid;
  std::optional<std::string> session_role;
};

struct AuditColumn {
  const char* name;
  const char* sql_type;  // as kvg.audit_insert declares the parameter
};

// kvg.audit_insert's parameters, in order.
inline constexpr int kAuditColumnCount = 31;
std::span<const AuditColumn> audit_columns();

// The row's values as text, in audit_columns() order (bytea as '\x' hex).
std::vector<SqlValue> audit_row_values(const AuditRecord& record, const AuditCaller& caller);

// "SELECT kvg.audit_insert($1::text, $2::name, ...)": text parameters cast
// to each column's type.
std::string audit_insert_statement();

// "pg_catalog.jsonb_build_object('operation', $1::text, ...)": the row as one
// jsonb value of text fields, from text parameters in column order.
std::string audit_row_json_expression();

// The value of column `name` in `values` (audit_columns() order).
const SqlValue& audit_value(const std::vector<SqlValue>& values, std::string_view name);

}  // namespace kvg::pg
