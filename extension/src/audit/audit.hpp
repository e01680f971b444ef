// The audit trail: one row per engine call (and per import), committed by
// the database's audit writer (workers/writer/writer.hpp) before the call returns,
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

#include "extension/src/audit/audit_row.hpp"
#include "extension/src/spi/spi.hpp"

namespace kvg::pg {

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

// The local append of a row's values (audit_row_values), committed by the
// audit writer; returns the row's id. Refuses (an error with the writer's
// SQLSTATE) when it was not committed, unless kvg.allow_unaudited: then a
// WARNING and nullopt.
std::optional<int64_t> append_through_writer(const std::string& operation, const std::vector<SqlValue>& values);

}  // namespace kvg::pg
