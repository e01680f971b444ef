// The calls' side of kvg's writer (writer.hpp): shared memory, starting a
// database's writer, queueing a request and waiting for its commit.
#include "extension/src/workers/writer/writer.hpp"

#include <cstring>
#include <optional>
#include <string_view>

#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/pg/shared_struct.hpp"
#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "commands/dbcommands.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "tcop/utility.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"
}

#include "extension/src/workers/protocol/wire.hpp"
#include "extension/src/workers/reserved/reserved_workers.hpp"
#include "extension/src/workers/segment/toc_segment.hpp"
#include "extension/src/workers/writer/writer_shmem.hpp"

namespace kvg::pg::writer {

namespace {

using worker_protocol::SlotState;

constexpr const char* kTranche = "kvg_audit";
// How long a call waits for a writer to connect before refusing.
constexpr int kStartWaitMs = 10000;

Shared* shared_memory = nullptr;
bool preloaded_flag = false;
int idle_timeout_ms = 60000;
ProcessUtility_hook_type previous_utility = nullptr;
// One request slot per process (shared_struct.hpp).
const SharedStruct kSharedMemory = per_process_struct("kvg audit writer", kTranche, &shared_memory);

// DROP DATABASE waits (5 s) for every other session of the database to go:
// the writer goes at once, and is not to connect again if the postmaster
// restarts it (its exit is then an error's).
void stop_writer_of_dropped_database(PlannedStmt* pstmt, const char* query, bool read_only,
                                     ProcessUtilityContext context, ParamListInfo params, QueryEnvironment* env,
                                     DestReceiver* dest, QueryCompletion* qc) {
  if (IsA(pstmt->utilityStmt, DropdbStmt)) {
    const Oid db = get_database_oid(castNode(DropdbStmt, pstmt->utilityStmt)->dbname, true);
    pid_t pids[kMaxWriters];
    int n = 0;
    LWLockAcquire(shared_memory->lock, LW_EXCLUSIVE);
    for (Writer& w : shared_memory->writers)
      if (w.state != WriterState::Free && w.database == db) {
        if (w.state == WriterState::Running) pids[n++] = w.pid;
        w.state = WriterState::Dropped;
      }
    LWLockRelease(shared_memory->lock);
    for (int i = 0; OidIsValid(db) && i < n; ++i) kill(pids[i], SIGTERM);
  }
  if (previous_utility)
    previous_utility(pstmt, query, read_only, context, params, env, dest, qc);
  else
    standard_ProcessUtility(pstmt, query, read_only, context, params, env, dest, qc);
}

// Under the lock: the entry of this database's writer of `lane`, or nullptr.
Writer* writer_of(Oid db, Lane lane) {
  for (Writer& w : shared_memory->writers)
    if ((w.state == WriterState::Starting || w.state == WriterState::Running) && w.database == db && w.lane == lane)
      return &w;
  return nullptr;
}

// A free entry: one never used, else a dropped database's.
Writer* free_writer() {
  for (Writer& w : shared_memory->writers)
    if (w.state == WriterState::Free) return &w;
  for (Writer& w : shared_memory->writers)
    if (w.state == WriterState::Dropped) return &w;
  return nullptr;
}

// The statement of `kind`; a kind nobody registered is a bug of the caller.
const Statement& registered(StatementKind kind) {
  const Statement* statement = find_statement(kind);
  if (!statement) throw Failure("XX000", "kvg: no statement of kind " + std::to_string(kind) + " is known to the writer", {});
  return *statement;
}

[[noreturn]] void writer_down(const std::string& why, const Statement& statement) {
  throw Failure("57V01", "kvg: " + statement.refusal + ": " + why + ", so the call is refused",
                statement.refusal_hint);
}

bool register_writer(Oid db, Lane lane) {
  // One of the writers kept since server start (reserved_workers.hpp), or,
  // when all of them run other writers, a dynamic worker.
  if (reserved::hand_off(reserved::Pool::Writer, writer_argument(db, lane))) return true;
  BackgroundWorker worker{};
  worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
  worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
  // After a crash the postmaster restarts it with the server; otherwise it
  // exits 0 (unregistered) and the next call starts one.
  worker.bgw_restart_time = 1;
  strlcpy(worker.bgw_library_name, "kvg", BGW_MAXLEN);
  strlcpy(worker.bgw_function_name, "kvg_audit_writer_main", BGW_MAXLEN);
  snprintf(worker.bgw_name, BGW_MAXLEN, "kvg audit writer for database %u (%s)", db, lane_name(lane));
  strlcpy(worker.bgw_type, "kvg audit writer", BGW_MAXLEN);
  worker.bgw_main_arg = writer_argument(db, lane);
  worker.bgw_notify_pid = 0;
  return RegisterDynamicBackgroundWorker(&worker, nullptr);
}

enum class Start { Running, Waiting, Registered, NoEntry, NoWorkerSlot, TimedOut };

// One look at this database's writer of `lane`, starting it when there is none.
Start look_or_start(Oid db, Lane lane) {
  const TimestampTz now = GetCurrentTimestamp();
  LWLockAcquire(shared_memory->lock, LW_EXCLUSIVE);
  Writer* w = writer_of(db, lane);
  Start result = Start::Waiting;
  if (w && w->state == WriterState::Running) {
    result = Start::Running;
  } else if (w && TimestampDifferenceExceeds(w->since, now, kStartWaitMs)) {
    w->state = WriterState::Free;  // never connected: the next call tries again
    result = Start::TimedOut;
  } else if (!w) {
    w = free_writer();
    if (!w) {
      result = Start::NoEntry;
    } else {
      *w = Writer{db, lane, WriterState::Starting, 0, nullptr, now, 0, 0};
      result = Start::Registered;
    }
  }
  LWLockRelease(shared_memory->lock);
  if (result == Start::Registered && !register_writer(db, lane)) {
    LWLockAcquire(shared_memory->lock, LW_EXCLUSIVE);
    if (w->database == db && w->state == WriterState::Starting) w->state = WriterState::Free;
    LWLockRelease(shared_memory->lock);
    result = Start::NoWorkerSlot;
  }
  return result;
}

void wait_a_little(int ms) {
  call([ms] {
    (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, ms, PG_WAIT_EXTENSION);
    ResetLatch(MyLatch);
    CHECK_FOR_INTERRUPTS();
  });
}

void require_preloaded() {
  if (!shared_memory)
    throw Failure("55000", "kvg: kvg is not loaded at server start, so it has no audit writer",
                  "Add to postgresql.conf: shared_preload_libraries = 'kvg' and restart the server.");
}

// A request in flight: queued in `slot`, its values in `segment`. Leaving
// before the writer answered (an interrupt) gives the slot back, or marks it
// abandoned if the writer has it, so the writer frees it when done.
class Request {
 public:
  Request(int slot, uint64_t request) : slot_(slot), request_(request) {}
  ~Request() {
    if (answered_) return;
    // Plain C calls that do not raise: this may run while a PostgreSQL error
    // unwinds; the segment is then detached by the transaction's abort.
    LWLockAcquire(shared_memory->lock, LW_EXCLUSIVE);
    (void)shared_memory->slots[slot_].request.abandon(request_);
    LWLockRelease(shared_memory->lock);
  }
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  // The final state (Done or Failed), its reply copied into `reply`; frees
  // the slot. Nothing while the writer has not answered. Only bytes are
  // copied under the lock: decoding them may throw, which must not happen
  // while the lock is held.
  std::optional<SlotState> answer(char (&reply)[worker_protocol::WriterReply::kFramedBytes]) {
    LWLockAcquire(shared_memory->lock, LW_EXCLUSIVE);
    Slot& s = shared_memory->slots[slot_];
    const std::optional<SlotState> state = s.request.collect(request_);
    if (state) std::memcpy(reply, s.reply, sizeof(reply));
    LWLockRelease(shared_memory->lock);
    answered_ = state.has_value();
    return state;
  }

 private:
  int slot_;
  uint64_t request_;
  bool answered_ = false;
};

}  // namespace

Shared* shared() { return shared_memory; }
bool preloaded() { return preloaded_flag; }

void define_settings() {
  DefineCustomIntVariable("kvg.audit_writer_idle_timeout",
                          "How long a database's audit writer waits for rows before it stops (docs/audit-chain.md).",
                          "The next audited call starts it again.", &idle_timeout_ms, 60000, 100, INT_MAX,
                          PGC_SIGHUP, GUC_UNIT_MS, nullptr, nullptr, nullptr);
}
int idle_ms() { return idle_timeout_ms; }

void setup_at_preload() {
  preloaded_flag = true;
  request_shared_struct(kSharedMemory);
  previous_utility = ProcessUtility_hook;
  ProcessUtility_hook = stop_writer_of_dropped_database;
}

void ensure_running(StatementKind kind) {
  require_preloaded();
  const Statement& statement = registered(kind);
  const Oid db = MyDatabaseId;
  for (;;) {
    switch (look_or_start(db, statement.lane)) {
      case Start::Running:
        return;
      case Start::NoEntry:
        throw Failure("53400", "kvg: audit writers run for " + std::to_string(kMaxWriters) +
                                   " databases already; this database's cannot start",
                      statement.refusal_hint);
      case Start::NoWorkerSlot:
        throw Failure("53400", "kvg: no background worker slot is free for this database's audit writer",
                      "Every reserved audit writer runs another database's (kvg.audit_writer_workers) and "
                      "max_worker_processes has no slot free: raise kvg.audit_writer_workers to the number of "
                      "databases with kvg calls at once (docs/operations.md, \"Worker slots\").");
      case Start::TimedOut:
        writer_down("this database's audit writer did not start within " + std::to_string(kStartWaitMs / 1000) +
                        " s",
                    statement);
      case Start::Waiting:
      case Start::Registered:
        wait_a_little(10);
        break;
    }
  }
}

namespace {

// The request's segment (writer_shmem.hpp: RequestKey). Plain C calls on
// what the caller made: run under pg::call.
dsm_segment* create_request_segment(const worker_protocol::WriterRequest& request) {
  const toc_segment::Chunk chunk{kRequestKey, worker_protocol::framed_size(request)};
  void* place = nullptr;
  dsm_segment* segment = toc_segment::create(kRequestMagic, {&chunk, 1}, &place);
  worker_protocol::encode_framed(request, static_cast<char*>(place), chunk.bytes);  // sized for it
  return segment;
}

// Queues the request in this process's slot, and wakes the writer; a writer
// that stopped since the call began (idle) is started again. Failure when
// none takes requests; the caller detaches the segment then.
uint64_t queue_request(StatementKind kind, dsm_segment* segment) {
  const Statement& statement = registered(kind);
  const Oid db = MyDatabaseId;
  const int slot = MyProc->pgprocno;
  if (slot < 0 || slot >= shared_memory->slot_count)
    throw Failure("XX000", "kvg: this process has no audit request slot", statement.refusal_hint);
  static worker_protocol::RequestIds request_ids;
  const uint64_t request_id = request_ids.next(MyProcPid);
  Latch* writer_latch = nullptr;
  for (int attempt = 0; attempt < 3 && !writer_latch; ++attempt) {
    ensure_running(kind);
    LWLockAcquire(shared_memory->lock, LW_EXCLUSIVE);
    if (Writer* w = writer_of(db, statement.lane); w && w->state == WriterState::Running) {
      writer_latch = w->latch;
      Slot& s = shared_memory->slots[slot];
      (void)s.request.queue(request_id);  // a fresh id: always queued
      s.database = db;
      s.lane = statement.lane;
      s.payload = dsm_segment_handle(segment);
      s.caller = MyLatch;
    }
    LWLockRelease(shared_memory->lock);
  }
  if (!writer_latch) writer_down("this database's audit writer keeps stopping", statement);
  SetLatch(writer_latch);
  return request_id;
}

// Waits for the writer's answer to the queued request.
worker_protocol::WriterReply wait_for_answer(Request& request, SlotState& state,
                                             char (&reply)[worker_protocol::WriterReply::kFramedBytes]) {
  for (;;) {
    if (const auto answered = request.answer(reply)) {
      state = *answered;
      return worker_protocol::decode_framed<worker_protocol::WriterReply>(reply, sizeof(reply));
    }
    // The writer sets our latch when it answers; the timeout only bounds a
    // missed wake-up. statement_timeout and cancel end the wait.
    wait_a_little(1000);
  }
}

}  // namespace

int64_t submit(StatementKind kind, const std::vector<SqlValue>& values) {
  require_preloaded();
  const Statement& statement = registered(kind);
  if (values.size() != statement.parameters.size())
    throw Failure("XX000", "kvg: statement \"" + statement.name + "\" takes " +
                               std::to_string(statement.parameters.size()) + " values, not " +
                               std::to_string(values.size()), {});
  worker_protocol::WriterRequest asked{kind, {}};
  for (const SqlValue& value : values)
    asked.values.push_back(value ? std::optional<std::string_view>(*value) : std::nullopt);
  const TimestampTz began = GetCurrentTimestamp();
  dsm_segment* segment = call([&asked] { return create_request_segment(asked); });
  uint64_t request_id = 0;
  try {
    request_id = queue_request(kind, segment);
  } catch (const Failure&) {
    call([segment] { dsm_detach(segment); });
    throw;
  }
  Request request(MyProc->pgprocno, request_id);
  SlotState state = SlotState::Free;
  char reply_bytes[worker_protocol::WriterReply::kFramedBytes];
  const worker_protocol::WriterReply reply = wait_for_answer(request, state, reply_bytes);
  call([segment] { dsm_detach(segment); });
  if (state == SlotState::Failed) {
    const std::string error(reply.error), sqlstate(reply.sqlstate);
    // A request refused for what it is (an artifact's parent gone, the disk
    // full) is that error, as the caller's own statement would have raised it.
    if (!statement.own_error_prefix.empty() && !sqlstate.empty() && sqlstate != "57P01" && sqlstate != "XX000")
      throw Failure(sqlstate.c_str(), statement.own_error_prefix + error, {});
    writer_down("the audit writer did not commit it (" + error + ")", statement);
  }
  // What the writer added to this call (scripts/bench-audit.sh reads it).
  const int64_t id = reply.result;
  const char* name = statement.name.c_str();
  call([id, began, name] {
    long seconds = 0;
    int micros = 0;
    TimestampDifference(began, GetCurrentTimestamp(), &seconds, &micros);
    elog(DEBUG1, "kvg: %s " INT64_FORMAT " committed by the audit writer in %ld us", name, id,
         seconds * 1000000L + micros);
  });
  return id;
}

}  // namespace kvg::pg::writer

using namespace kvg::pg::writer;

extern "C" {

// kvg.require_preload(): called by the install script. Plain C: nothing to
// unwind.
PG_FUNCTION_INFO_V1(kvg_require_preload);
Datum kvg_require_preload(PG_FUNCTION_ARGS) {
  if (!preloaded())
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("kvg must be loaded at server start"),
                    errdetail("Its settings and its audit writer (a background worker) exist only then."),
                    errhint("Add this line to postgresql.conf and restart the server: "
                            "shared_preload_libraries = 'kvg'")));
  PG_RETURN_VOID();
}

// kvg_audit_writers(): one row per database whose writer is starting or
// running. Plain C: nothing to unwind.
PG_FUNCTION_INFO_V1(kvg_audit_writers);
Datum kvg_audit_writers(PG_FUNCTION_ARGS) {
  InitMaterializedSRF(fcinfo, 0);
  ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  if (!shared()) return Datum(0);
  Writer copy[kMaxWriters];
  LWLockAcquire(shared()->lock, LW_SHARED);
  std::memcpy(static_cast<void*>(copy), shared()->writers, sizeof(copy));
  LWLockRelease(shared()->lock);
  for (const Writer& w : copy) {
    if (w.state != WriterState::Starting && w.state != WriterState::Running) continue;
    Datum values[6] = {ObjectIdGetDatum(w.database), Int32GetDatum(w.pid),
                       CStringGetTextDatum(w.state == WriterState::Running ? "running" : "starting"),
                       Int64GetDatum(int64(w.rows)), Int64GetDatum(int64(w.commits)),
                       CStringGetTextDatum(lane_name(w.lane))};
    bool nulls[6] = {false, w.pid == 0, false, false, false, false};
    tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
  }
  return Datum(0);
}

}
