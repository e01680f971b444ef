// The audit trail: one row in kvg.audit per engine call (and per import), in
// the caller's transaction, so it commits or rolls back with the work it
// records. The hash chain is computed by kvg.audit_insert() in the SQL script
// (docs/audit-chain.md), the single place that knows the canonical encoding.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kvg::pg {

class Spi;

struct AuditRecord {
  // "import", "capture", "generate", "graft_check", "learn", "solve", "answer"
  std::string operation;
  std::optional<std::string> model_fingerprint;
  std::optional<std::string> recipe;
  std::optional<std::string> input_sha256;     // of the prompt / input bytes / question
  std::optional<std::string> artifact_sha256;  // the artifact used or produced
  std::optional<std::string> output_sha256;    // of output_text
  std::optional<std::string> logits_sha256;
  std::optional<int32_t> tokens_in;            // prompt tokens
  std::optional<int32_t> tokens_out;           // decoded tokens
  std::optional<int32_t> tokens_grafted;       // prompt tokens whose KV was grafted, not computed
  std::optional<std::string> mode;             // answers: "recurring", "transfer", "cold"
  std::optional<int64_t> knowledge_id;
  std::optional<bool> verified;
  std::optional<std::string> output_text;      // the text output_sha256 hashes
  std::optional<int64_t> graft_us, prefill_us, decode_us;

  // Sets output_text and its hash together.
  void set_output(const std::string& text);
};

// Appends one row and returns its id. The row's role is the calling role.
int64_t audit_append(Spi& spi, const AuditRecord& record);

}  // namespace kvg::pg
