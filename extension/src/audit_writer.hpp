// The audit writer: a background worker per database that inserts and links
// audit rows in transactions of its own (docs/audit-chain.md).
//
// An audited call puts its row (kvg.audit_insert's parameters, as text) in a
// dynamic shared memory segment, queues it in a slot of kvg's shared memory
// and waits, interruptibly, until the writer of its database has committed
// it; the writer takes every row queued meanwhile into the same transaction
// (group commit). So a row is committed before its answer is returned,
// whatever the caller's transaction does afterwards, and the chain's head is
// locked only by the writer, for the length of one short transaction.
//
// Writers are dynamic background workers, one per database (a worker
// connects to one database), registered by the first call that needs one and
// stopping when idle for kvg.audit_writer_idle_timeout or when their database
// is dropped. The postmaster restarts one that crashed along with the server
// (bgw_restart_time); one that stopped otherwise is started again by the next
// call. A call whose writer is not running, or stops before committing its
// row, is refused (57V01): an answer is never returned without its row,
// unless a superuser set kvg.allow_unaudited.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "extension/src/spi.hpp"

namespace kvg::pg::audit_writer {

// From _PG_init under shared_preload_libraries: asks for the shared memory,
// attaches to it in every process, watches DROP DATABASE.
void setup_at_preload();
bool preloaded();

// Why a request was not committed: a SQLSTATE and message for the caller.
struct Failure : std::runtime_error {
  Failure(const char* state, const std::string& message, const std::string& hint)
      : std::runtime_error(message), sqlstate(state), hint(hint) {}
  std::string sqlstate;
  std::string hint;
};

// Before an audited call's work: the writer of this database runs (started
// and waited for, at most a few seconds), or Failure.
void ensure_running();

// Hands the row to this database's writer and waits until it is committed;
// returns its id. Failure when it was not; a cancel or statement_timeout
// while waiting is PostgreSQL's error (the row may still be committed: an
// answer lost in transit, which its caller_xid shows).
int64_t append(const std::vector<SqlValue>& values);

// Hands an artifact to this database's writer, which stores it in a
// transaction of its own with kvg.artifact_store (the values are its
// parameters, the content among them) and commits before this returns: true
// when it inserted the row, false when the content was stored already.
// Failure when it was not stored: 57V01 when the writer is down (an
// artifact is never stored in the caller's transaction), else the error
// kvg.artifact_store raised, with its SQLSTATE.
bool store_artifact(const std::vector<SqlValue>& values);

// The parameters of one request, flattened into bytes and back (a count, then
// for each value a null flag, a length and the bytes).
std::string encode_values(const std::vector<SqlValue>& values);

}  // namespace kvg::pg::audit_writer
