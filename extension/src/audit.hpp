// The audit trail: one row per engine call (and per import), written in the
// caller's transaction, so it commits or rolls back with the work it records;
// on a hot standby, appended on the primary instead (audit_forward.hpp).
// The row waits in kvg.audit_pending and is linked into the hash chain of
// kvg.audit when its transaction commits (kvg_audit_link below), so a long
// transaction never holds the chain's head. The canonical encoding lives in
// one place, kvg.audit_row_hash() in the SQL script (docs/audit-chain.md).
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

  // Sets output_text, output_bytes and output_sha256 (of the raw bytes) together
  // from what the model produced.
  void set_output(const std::string& raw);
};

// Appends one row, whose role is the calling role, and returns its id. On a
// primary the row is written in the caller's transaction (its chain
// position, seq, is given at commit); on a hot standby it is appended on the
// primary and committed there before this returns. nullopt only on a standby
// that could not record it while kvg.allow_unaudited is on (it has said so
// with a WARNING); otherwise that is an error and the call returns nothing.
std::optional<int64_t> audit_append(Spi& spi, const AuditRecord& record);

// Before an audited call does its work: on a standby, refuses at once when
// the primary cannot be reached (rather than after the work). Nothing on a
// primary. EngineCall does this first, so every engine function has it.
void audit_preflight();
struct AuditPreflight {
  AuditPreflight() { audit_preflight(); }
};

// The parameters of kvg.audit_insert for `record` and `role`, as text, in
// its order: what a local append inserts and a standby sends the primary.
std::vector<SqlValue> audit_values(const AuditRecord& record, const std::string& role);

// The local append: a pending row in the caller's transaction, as the
// schema owner; returns its id.
int64_t audit_insert_pending(Spi& spi, const std::vector<SqlValue>& values);

}  // namespace kvg::pg
