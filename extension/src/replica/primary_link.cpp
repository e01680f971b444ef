#include "extension/src/replica/primary_link.hpp"

#include <chrono>
#include <memory>

#include "extension/src/replica/conninfo.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/replica/replica_settings.hpp"

// Not postgres.hpp: its be-fsstubs.h declares the server's lo_read and
// lo_write, which libpq-fe.h declares differently for clients.
extern "C" {
#include "postgres.h"

#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/wait_event.h"
}
#include "libpq-fe.h"

namespace kvg::pg::primary_link {

namespace {

using Kind = Failure::Kind;

// The backend's one connection, and what it was opened with.
struct Link {
  PGconn* conn = nullptr;
  std::string opened_with;  // kvg.audit_conninfo and the database name
  bool exit_hook = false;
};
Link link;

void drop() noexcept {
  if (link.conn) PQfinish(link.conn);
  link.conn = nullptr;
  link.opened_with.clear();
}

void close_at_exit(int, Datum) { drop(); }

// A cancel, statement_timeout or recovery conflict is reported by
// PostgreSQL itself (CHECK_FOR_INTERRUPTS); the connection goes first, since
// the statement on it is then in an unknown state.
void process_interrupts() {
  try {
    check_for_interrupts();
  } catch (...) {
    drop();
    throw;
  }
}

// Waits for `events` on `sock`, the latch or `timeout_ms` (-1: none), then
// processes interrupts. Returns WaitLatchOrSocket's mask.
int wait_for(int events, pgsocket sock, long timeout_ms) {
  const int mask = events | WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | (timeout_ms >= 0 ? WL_TIMEOUT : 0);
  const int rc = call([&] {
    const int r = WaitLatchOrSocket(MyLatch, mask, sock, timeout_ms, PG_WAIT_EXTENSION);
    if (r & WL_LATCH_SET) ResetLatch(MyLatch);
    return r;
  });
  process_interrupts();
  return rc;
}

[[noreturn]] void fail(Kind kind, const std::string& sqlstate, const std::string& message,
                       const std::string& hint = {}) {
  drop();
  throw Failure(kind, sqlstate, message, {}, hint);
}

[[noreturn]] void lost(const char* doing) {
  fail(Kind::Lost, "08006",
       std::string("the connection to the primary broke ") + doing + ": " + libpq_message(PQerrorMessage(link.conn)));
}

// An idle connection whose server has gone shows it once what arrived since
// is read: a FATAL message (taken as a notice), then the end of the stream.
bool healthy() {
  for (int i = 0; i < 2; ++i) {
    if (PQstatus(link.conn) != CONNECTION_OK || !PQconsumeInput(link.conn)) return false;
    if (PQisBusy(link.conn)) return false;  // an idle connection has nothing in flight
  }
  return PQstatus(link.conn) == CONNECTION_OK && PQtransactionStatus(link.conn) == PQTRANS_IDLE;
}

std::string current_database() {
  const char* name = call([] { return static_cast<const char*>(get_database_name(MyDatabaseId)); });
  return name ? name : "";
}

struct FreeOptions {
  void operator()(PQconninfoOption* o) const { PQconninfoFree(o); }
};

// kvg.audit_conninfo as keyword/value arrays: the database defaults to this
// one (its copy on the primary), and the connection names itself.
void start_connect(const std::string& conninfo, const std::string& dbname) {
  char* problem = nullptr;
  std::unique_ptr<PQconninfoOption, FreeOptions> options(PQconninfoParse(conninfo.c_str(), &problem));
  if (!options) {
    const std::string why = libpq_message(problem);
    if (problem) PQfreemem(problem);
    fail(Kind::Unreachable, "08001", "kvg.audit_conninfo cannot be parsed: " + why);
  }
  std::vector<const char*> keywords, values;
  bool has_dbname = false;
  for (const PQconninfoOption* o = options.get(); o->keyword; ++o) {
    if (!o->val) continue;
    keywords.push_back(o->keyword);
    values.push_back(o->val);
    has_dbname = has_dbname || std::string(o->keyword) == "dbname";
  }
  if (!has_dbname) {
    keywords.push_back("dbname");
    values.push_back(dbname.c_str());
  }
  keywords.push_back("fallback_application_name");
  values.push_back("kvg audit forwarder");
  keywords.push_back(nullptr);
  values.push_back(nullptr);
  // libpq copies the values: `options` may go once it returns.
  link.conn = PQconnectStartParams(keywords.data(), values.data(), 0);
  if (!link.conn) fail(Kind::Unreachable, "08001", "libpq could not allocate a connection");
}

void ignore_notice(void*, const PGresult*) {}

void connect(const std::string& conninfo, const std::string& dbname) {
  if (!link.exit_hook) {
    call([] { on_proc_exit(close_at_exit, 0); });
    link.exit_hook = true;
  }
  start_connect(conninfo, dbname);
  const int timeout_ms = settings::audit_connect_timeout_ms();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  // Before the first PQconnectPoll, wait as if it had said "writing".
  PostgresPollingStatusType state =
      PQstatus(link.conn) == CONNECTION_BAD ? PGRES_POLLING_FAILED : PGRES_POLLING_WRITING;
  while (state != PGRES_POLLING_OK) {
    if (state == PGRES_POLLING_FAILED)
      fail(Kind::Unreachable, "08001", "cannot connect to the primary: " + libpq_message(PQerrorMessage(link.conn)));
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      fail(Kind::Unreachable, "08001",
           "cannot connect to the primary: no connection after " + std::to_string(timeout_ms) +
               " ms (kvg.audit_connect_timeout)");
    const pgsocket sock = PQsocket(link.conn);
    if (sock == PGINVALID_SOCKET) {  // between two hosts of a list: libpq moves on by itself
      state = PQconnectPoll(link.conn);
      continue;
    }
    const int rc = wait_for(state == PGRES_POLLING_READING ? WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE, sock,
                            long(left.count()));
    if (rc & (WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE)) state = PQconnectPoll(link.conn);
  }
  // A standby would refuse the row anyway; say what is wrong instead.
  const char* hot_standby = PQparameterStatus(link.conn, "in_hot_standby");
  if (hot_standby && std::string(hot_standby) == "on")
    fail(Kind::Unreachable, "08001", "kvg.audit_conninfo leads to a server that is itself a standby",
         "Name the primary, or list every server with target_session_attrs=read-write so that the connection "
         "follows a failover.");
  PQsetNoticeReceiver(link.conn, ignore_notice, nullptr);
  if (PQsetnonblocking(link.conn, 1) != 0)
    fail(Kind::Unreachable, "08001", "libpq: " + libpq_message(PQerrorMessage(link.conn)));
}

struct ClearResult {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ClearResult>;

std::string field(const PGresult* r, int code) {
  const char* v = PQresultErrorField(r, code);
  return v ? v : "";
}

}  // namespace

void ensure_connected() {
  const std::string conninfo = settings::audit_conninfo();
  if (conninfo.empty())
    throw Failure(Kind::NotConfigured, "55000", "kvg.audit_conninfo is not set", {},
                  "A superuser sets kvg.audit_conninfo on the standby to a connection string for the primary whose "
                  "role is a member of kvg_audit_writer (docs/scale-out.md).");
  const std::string opened_with = conninfo + '\n' + current_database();
  if (link.conn && link.opened_with == opened_with && healthy()) return;
  drop();
  connect(conninfo, current_database());
  link.opened_with = opened_with;
}

std::vector<SqlValue> run_one_row(const char* sql, const std::vector<SqlValue>& params) {
  std::vector<const char*> values;
  for (const SqlValue& p : params) values.push_back(p ? p->c_str() : nullptr);
  ensure_connected();
  if (!PQsendQueryParams(link.conn, sql, int(values.size()), nullptr, values.data(), nullptr, nullptr, 0)) {
    // Nothing reached the primary: a connection that broke since the health
    // check is opened again, once.
    drop();
    ensure_connected();
    if (!PQsendQueryParams(link.conn, sql, int(values.size()), nullptr, values.data(), nullptr, nullptr, 0))
      fail(Kind::Unreachable, "08001", "cannot send to the primary: " + libpq_message(PQerrorMessage(link.conn)));
  }
  // From here the primary may have run the statement: no second try.
  for (int pending; (pending = PQflush(link.conn)) != 0;) {
    if (pending < 0) lost("while sending");
    const int rc = wait_for(WL_SOCKET_WRITEABLE | WL_SOCKET_READABLE, PQsocket(link.conn), -1);
    if ((rc & WL_SOCKET_READABLE) && !PQconsumeInput(link.conn)) lost("while sending");
  }
  std::optional<std::vector<SqlValue>> row;
  std::optional<Failure> refused;
  for (;;) {
    while (PQisBusy(link.conn)) {
      const int rc = wait_for(WL_SOCKET_READABLE, PQsocket(link.conn), -1);
      if ((rc & WL_SOCKET_READABLE) && !PQconsumeInput(link.conn)) lost("before it answered");
    }
    const Result r(PQgetResult(link.conn));
    if (!r) break;  // ReadyForQuery: the transaction is over
    if (PQresultStatus(r.get()) == PGRES_TUPLES_OK && PQntuples(r.get()) == 1 && !row && !refused) {
      row.emplace();
      for (int c = 0; c < PQnfields(r.get()); ++c)
        row->push_back(PQgetisnull(r.get(), 0, c) ? std::nullopt : SqlValue(PQgetvalue(r.get(), 0, c)));
    } else if (!refused) {
      const std::string state = field(r.get(), PG_DIAG_SQLSTATE);
      refused.emplace(Kind::Rejected, state.size() == 5 ? state : "XX000",
                      "the primary refused it: " +
                          (PQresultStatus(r.get()) == PGRES_TUPLES_OK
                               ? std::to_string(PQntuples(r.get())) + " rows instead of one"
                               : libpq_message(PQresultErrorMessage(r.get()))),
                      field(r.get(), PG_DIAG_MESSAGE_DETAIL), field(r.get(), PG_DIAG_MESSAGE_HINT));
    }
  }
  if (PQstatus(link.conn) != CONNECTION_OK) lost("before it answered");
  if (refused) throw *refused;
  if (!row) fail(Kind::Lost, "08006", "the primary answered without a result");
  return *row;
}

}  // namespace kvg::pg::primary_link
