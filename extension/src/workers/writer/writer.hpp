// kvg's writer: a background worker per database that commits rows in
// transactions of its own, so that what a call must leave behind is
// committed before the call returns, whatever the caller's transaction does
// afterwards (docs/audit-chain.md). It runs registered statements
// (writer_statements.hpp: the audit row's insert, kvg.artifact_store) and
// knows nothing else of what they write.
//
// A call puts the statement's kind and parameters (protocol/
// writer_messages.hpp) in a dynamic shared memory segment, queues it in its
// slot of kvg's shared memory (protocol/request_slot.hpp) and waits,
// interruptibly, until the writer of its database has committed it; the
// writer takes every request queued meanwhile into the same transaction
// (group commit), and tries each alone when that transaction fails, so one
// bad request refuses only its own call. The audit chain's head is thus
// locked only by the writer, for the length of one short transaction.
//
// Writers are dynamic background workers, one per database (a worker
// connects to one database), registered by the first call that needs one and
// stopping when idle for kvg.audit_writer_idle_timeout or when their database
// is dropped. The postmaster restarts one that crashed along with the server
// (bgw_restart_time); one that stopped otherwise is started again by the next
// call. A call whose writer is not running, or stops before committing its
// request, is refused (57V01): with the audit row's statement, an answer is
// never returned without its row, unless a superuser set kvg.allow_unaudited.
// (SQL still names them audit writers: kvg_audit_writers(), the processes'
// application_name 'kvg audit writer'.)
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "extension/src/spi/spi.hpp"
#include "extension/src/workers/writer/writer_statements.hpp"

namespace kvg::pg::writer {

// From _PG_init under shared_preload_libraries: asks for the shared memory,
// attaches to it in every process, watches DROP DATABASE.
void setup_at_preload();
bool preloaded();
// From _PG_init: kvg.audit_writer_idle_timeout (server configuration,
// SIGHUP): when an idle writer stops.
void define_settings();
int idle_ms();

// Why a request was not committed: a SQLSTATE and message for the caller.
struct Failure : std::runtime_error {
  Failure(const char* state, const std::string& message, const std::string& hint)
      : std::runtime_error(message), sqlstate(state), hint(hint) {}
  std::string sqlstate;
  std::string hint;
};

// Before a call's work: the writer of this database runs (started and
// waited for, at most a few seconds), or Failure, worded as statement
// `kind`'s refusal.
void ensure_running(StatementKind kind);

// Hands statement `kind` with `values` (one per parameter; nullopt: NULL)
// to this database's writer and waits until it is committed: the
// statement's result. Failure when it was not: 57V01 when the writer is
// down (a request is never run in the caller's transaction), or the
// statement's own error when it registered own_error_prefix. A cancel or
// statement_timeout while waiting is PostgreSQL's error (the request may
// still be committed: an answer lost in transit).
int64_t submit(StatementKind kind, const std::vector<SqlValue>& values);

}  // namespace kvg::pg::writer
