// A libpq connection from this backend to the server kvg.audit_conninfo
// names: on a hot standby, the primary that records its audit rows
// (audit_forward.hpp, docs/scale-out.md). PostgreSQL 15 has no
// libpq-be-fe-helpers.h, so the waiting is written here: every wait is
// WaitLatchOrSocket on the backend's latch, so a cancel, statement_timeout or
// recovery conflict interrupts it as it would any server wait, and the
// connect is bounded by kvg.audit_connect_timeout.
//
// One connection per backend, opened on first use and kept until the
// backend exits; it is dropped (and the next use reconnects) when it broke,
// when the setting changed, or when a wait on it was interrupted, since the
// statement it carried is then in an unknown state.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "extension/src/spi/spi.hpp"

namespace kvg::pg::primary_link {

// Why the primary did not answer, with the SQLSTATE the caller reports.
class Failure : public std::runtime_error {
 public:
  enum class Kind {
    NotConfigured,  // 55000: kvg.audit_conninfo is empty
    Unreachable,    // 08001: no connection (refused, timed out, a standby answered)
    Lost,           // 08006: the connection broke after the statement was sent
    Rejected,       // the primary's own SQLSTATE: it ran the statement and refused
  };
  Failure(Kind kind, std::string sqlstate, const std::string& message, std::string detail = {},
          std::string hint = {})
      : std::runtime_error(message),
        kind(kind),
        sqlstate(std::move(sqlstate)),
        detail(std::move(detail)),
        hint(std::move(hint)) {}
  Kind kind;
  std::string sqlstate;  // five characters
  std::string detail, hint;
};

// Opens the connection unless a healthy one is open (a health check reads
// what the server sent while it was idle: a closed connection shows). Throws
// Failure (NotConfigured, Unreachable).
void ensure_connected();

// Runs `sql` with text parameters ($1..$n, cast in the statement) as one
// transaction on the primary and returns its single row, every column as
// text. Returns only after the server's ReadyForQuery: the transaction has
// committed. Throws Failure; an interrupt drops the connection and is
// reported by PostgreSQL (57014 and the like).
std::vector<SqlValue> run_one_row(const char* sql, const std::vector<SqlValue>& params);

}  // namespace kvg::pg::primary_link
