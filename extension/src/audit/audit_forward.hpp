// Audit rows of a hot standby, appended on the primary (docs/scale-out.md).
//
// A standby cannot write, but every answer it gives must still be in the one
// hash chain. Every audited call ends in audit_append (audit.hpp); on a
// standby that sends the row's values, computed here (input, artifact and
// output hashes, the output itself), over libpq (primary_link.hpp) to
// kvg.audit_append_forwarded on the primary, which runs as a member of
// kvg_audit_writer, inserts the row as a local call would, links it into the
// chain at once and returns its id, seq and row_hash. The standby's call
// returns its result only after that transaction has committed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "extension/src/spi/spi.hpp"

namespace kvg::pg {

// Appends the row (audit_values) on the primary and returns its id there.
// When the primary cannot record it: an error naming why (55000 not
// configured, 08001 unreachable, 08006 connection lost, or the primary's own
// SQLSTATE when it refused the row), unless kvg.allow_unaudited is on and the
// primary could not be reached: then a WARNING (01V01) and nullopt.
std::optional<int64_t> append_on_primary(const std::string& operation, const std::vector<SqlValue>& values);

// The same refusal before any work, when the primary cannot be reached now
// (nothing when kvg.allow_unaudited is on: the append decides).
void check_primary_reachable();

}  // namespace kvg::pg
