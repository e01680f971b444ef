// The audit trail: one row per engine call (and per import), committed by
// the database's audit writer (audit_writer.hpp) before the call returns,
// whatever the caller's transaction does afterwards; on a hot standby,
// appended on the primary instead (audit_forward.hpp), where it takes the
// same path. The row names the caller's transaction (caller_xid), so an
// auditor tells answers that committed transactions used from the others.
// The canonical encoding lives in one place, kvg.audit_row_hash() in the SQL
// script (docs/audit-chain.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "extension/src/spi.hpp"

namespace kvg::pg {

struct AuditRecord {
  // "import", "capture", "generate", "graft_check", "learn", "solve", "answer", "chat"
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

  // Sets output_text, output_bytes and output_sha256 (of the raw bytes) together
  // from what the model produced.
  void set_output(const std::string& raw);
};

// Appends one row, whose role is the calling role, and returns its id once
// it is committed: on a primary by the audit writer, on a hot standby on the
// primary. nullopt only when it could not be recorded while
// kvg.allow_unaudited is on (it has said so with a WARNING); otherwise that
// is an error and the call returns nothing.
std::optional<int64_t> audit_append(Spi& spi, const AuditRecord& record);

// Before an audited call does its work: refuses at once when its row could
// not be recorded (a standby that cannot reach the primary, a primary whose
// audit writer cannot start), rather than after the work. EngineCall does
// this first, so every engine function has it.
void audit_preflight();
struct AuditPreflight {
  AuditPreflight() { audit_preflight(); }
};

// When kvg.allow_unaudited let a result go without its row: a WARNING
// (01V01) saying so and why.
void warn_unaudited(const std::string& operation, const std::string& why);

// The parameters of kvg.audit_insert for `record` and `role`, as text, in
// its order: what a local append inserts and a standby sends the primary.
std::vector<SqlValue> audit_values(const AuditRecord& record, const std::string& role);

// The local append: `values` (audit_values) and what only a local call
// knows (its transaction, its session user) and the reproduction fields,
// committed by the audit writer; returns the row's id. Refuses (an error
// with the writer's SQLSTATE) when it was not committed, unless
// kvg.allow_unaudited: then a WARNING and nullopt.
std::optional<int64_t> append_through_writer(const std::string& operation, std::vector<SqlValue> values,
                                             const AuditRecord* record);

}  // namespace kvg::pg
