// The calls' side of the audit writer (audit_writer.hpp): shared memory,
// starting a database's writer, queueing a row and waiting for its commit.
#include "extension/src/audit_writer.hpp"

#include <cstring>

#include "extension/src/pg_boundary.hpp"
#include "extension/src/settings.hpp"
#include "extension/src/shared_struct.hpp"
#include "extension/src/postgres.hpp"

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

#include "extension/src/audit_writer_shmem.hpp"

namespace kvg::pg::audit_writer {

namespace {

constexpr const char* kTranche = "kvg_audit";
// How long a call waits for a writer to connect before refusing.
constexpr int kStartWaitMs = 10000;
constexpr const char* kWriterDownHint =
    "The audit writer is a background worker of kvg (see kvg_audit_writers() and the server log); a call is "
    "refused rather than answered without its audit row (docs/audit-chain.md).";

Shared* shared_memory = nullptr;
bool preloaded_flag = false;
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
    pid_t pid = 0;
    LWLockAcquire(shared_memory->lock, LW_EXCLUSIVE);
    for (Writer& w : shared_memory->writers)
      if (w.state != WriterState::Free && w.database == db) {
        pid = w.state == WriterState::Running ? w.pid : 0;
        w.state = WriterState::Dropped;
      }
    LWLockRelease(shared_memory->lock);
    if (OidIsValid(db) && pid != 0) kill(pid, SIGTERM);
  }
  if (previous_utility)
    previous_utility(pstmt, query, read_only, context, params, env, dest, qc);
  else
    standard_ProcessUtility(pstmt, query, read_only, context, params, env, dest, qc);
}

// Under the lock: this database's entry, or nullptr.
Writer* writer_of(Oid db) {
  for (Writer& w : shared_memory->writers)
    if ((w.state == WriterState::Starting || w.state == WriterState::Running) && w.database == db) return &w;
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

[[noreturn]] void writer_down(const std::string& why, RequestKind kind = RequestKind::AuditRow) {
  if (kind == RequestKind::Artifact)
    throw Failure("57V01", "kvg: this artifact cannot be stored: " + why + ", so the call is refused",
                  "Artifacts are stored by the same background worker as audit rows (docs/audit-chain.md); "
                  "see kvg_audit_writers() and the server log.");
  throw Failure("57V01", "kvg: this call's audit row cannot be recorded: " + why + ", so the call is refused",
                kWriterDownHint);
}

bool register_writer(Oid db) {
  BackgroundWorker worker{};
  worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
  worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
  // After a crash the postmaster restarts it with the server; otherwise it
  // exits 0 (unregistered) and the next call starts one.
  worker.bgw_restart_time = 1;
  strlcpy(worker.bgw_library_name, "kvg", BGW_MAXLEN);
  strlcpy(worker.bgw_function_name, "kvg_audit_writer_main", BGW_MAXLEN);
  snprintf(worker.bgw_name, BGW_MAXLEN, "kvg audit writer for database %u", db);
  strlcpy(worker.bgw_type, "kvg audit writer", BGW_MAXLEN);
  worker.bgw_main_arg = ObjectIdGetDatum(db);
  worker.bgw_notify_pid = 0;
  return RegisterDynamicBackgroundWorker(&worker, nullptr);
}

enum class Start { Running, Waiting, Registered, NoEntry, NoWorkerSlot, TimedOut };

// One look at this database's writer, starting it when there is none.
Start look_or_start(Oid db) {
  const TimestampTz now = GetCurrentTimestamp();
  LWLockAcquire(shared_memory->lock, LW_EXCLUSIVE);
  Writer* w = writer_of(db);
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
      *w = Writer{db, WriterState::Starting, 0, nullptr, now, 0, 0};
      result = Start::Registered;
    }
  }
  LWLockRelease(shared_memory->lock);
  if (result == Start::Registered && !register_writer(db)) {
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

// A row in flight: queued in `slot`, its values in `segment`. Leaving before
// the writer answered (an interrupt) gives the slot back, or marks it
// abandoned if the writer has it, so the writer frees it when done.
class Request {
 public:
  Request(dsm_segment* segment, int slot, uint64_t request) : segment_(segment), slot_(slot), request_(request) {}
  ~Request() {
    if (answered_) return;
    // Plain C calls that do not raise: this may run while a PostgreSQL error
    // unwinds; the segment is then detached by the transaction's abort.
    LWLockAcquire(shared_memory->lock, LW_EXCLUSIVE);
    Slot& s = shared_memory->slots[slot_];
    if (s.request == request_) s.state = s.state == SlotState::Claimed ? SlotState::Abandoned : SlotState::Free;
    LWLockRelease(shared_memory->lock);
  }
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  // The slot's final state (Done or Failed), with its id or error; frees it.
  SlotState answer(int64_t& id, std::string& error, std::string& sqlstate) {
    LWLockAcquire(shared_memory->lock, LW_EXCLUSIVE);
    Slot& s = shared_memory->slots[slot_];
    const SlotState state = s.state;  // only this backend queues in its slot
    if (state == SlotState::Done || state == SlotState::Failed) {
      id = s.id;
      error.assign(s.error, strnlen(s.error, sizeof(s.error)));
      sqlstate.assign(s.sqlstate, strnlen(s.sqlstate, sizeof(s.sqlstate)));
      s.state = SlotState::Free;
      answered_ = true;
    }
    LWLockRelease(shared_memory->lock);
    return state;
  }
  bool answered() const { return answered_; }
  dsm_segment* segment() const { return segment_; }

 private:
  dsm_segment* segment_;
  int slot_;
  uint64_t request_;
  bool answered_ = false;
};

}  // namespace

Shared* shared() { return shared_memory; }
bool preloaded() { return preloaded_flag; }

void setup_at_preload() {
  preloaded_flag = true;
  request_shared_struct(kSharedMemory);
  previous_utility = ProcessUtility_hook;
  ProcessUtility_hook = stop_writer_of_dropped_database;
}

void ensure_running() {
  require_preloaded();
  const Oid db = MyDatabaseId;
  for (;;) {
    switch (look_or_start(db)) {
      case Start::Running:
        return;
      case Start::NoEntry:
        throw Failure("53400", "kvg: audit writers run for " + std::to_string(kMaxWriters) +
                                   " databases already; this database's cannot start",
                      kWriterDownHint);
      case Start::NoWorkerSlot:
        throw Failure("53400", "kvg: no background worker slot is free for this database's audit writer",
                      "Raise max_worker_processes (each database with kvg calls in progress takes one).");
      case Start::TimedOut:
        writer_down("this database's audit writer did not start within " + std::to_string(kStartWaitMs / 1000) +
                    " s");
      case Start::Waiting:
      case Start::Registered:
        wait_a_little(10);
        break;
    }
  }
}

std::string encode_values(const std::vector<SqlValue>& values) {
  std::string out;
  auto put32 = [&out](uint32_t n) { out.append(reinterpret_cast<const char*>(&n), sizeof(n)); };
  put32(uint32_t(values.size()));
  for (const SqlValue& v : values) {
    out.push_back(v ? 1 : 0);
    put32(v ? uint32_t(v->size()) : 0);
    if (v) out.append(*v);
  }
  return out;
}

namespace {

// Hands one request to this database's writer and waits for its answer:
// the id it committed, or Failure.
int64_t submit(RequestKind kind, const std::string& bytes) {
  require_preloaded();
  const TimestampTz began = GetCurrentTimestamp();
  dsm_segment* segment = call([&] {
    dsm_segment* seg = dsm_create(bytes.size(), 0);
    std::memcpy(dsm_segment_address(seg), bytes.data(), bytes.size());
    return seg;
  });
  const dsm_handle handle = dsm_segment_handle(segment);

  // Queue it in this backend's slot, and wake the writer. A writer that
  // stopped since the call began (idle) is started again.
  const Oid db = MyDatabaseId;
  const int slot = MyProc->pgprocno;
  if (slot < 0 || slot >= shared_memory->slot_count) {
    call([segment] { dsm_detach(segment); });
    throw Failure("XX000", "kvg: this process has no audit request slot", kWriterDownHint);
  }
  static uint64_t requests = 0;
  const uint64_t request_id = (uint64_t(MyProcPid) << 32) | ++requests;
  Latch* writer_latch = nullptr;
  for (int attempt = 0; attempt < 3 && !writer_latch; ++attempt) {
    try {
      ensure_running();
    } catch (const Failure&) {
      call([segment] { dsm_detach(segment); });
      throw;
    }
    LWLockAcquire(shared_memory->lock, LW_EXCLUSIVE);
    if (Writer* w = writer_of(db); w && w->state == WriterState::Running) {
      writer_latch = w->latch;
      Slot& s = shared_memory->slots[slot];
      s.state = SlotState::Queued;
      s.kind = kind;
      s.request = request_id;
      s.database = db;
      s.payload = handle;
      s.caller = MyLatch;
      s.id = 0;
      s.sqlstate[0] = '\0';
      s.error[0] = '\0';
    }
    LWLockRelease(shared_memory->lock);
  }
  if (!writer_latch) {
    call([segment] { dsm_detach(segment); });
    writer_down("this database's audit writer keeps stopping", kind);
  }
  SetLatch(writer_latch);

  Request request(segment, slot, request_id);
  int64_t id = 0;
  std::string error, sqlstate;
  for (;;) {
    const SlotState state = request.answer(id, error, sqlstate);
    if (state == SlotState::Done || state == SlotState::Failed) break;
    // The writer sets our latch when it answers; the timeout only bounds a
    // missed wake-up. statement_timeout and cancel end the wait.
    wait_a_little(1000);
  }
  call([segment] { dsm_detach(segment); });
  if (!error.empty()) {
    // An artifact refused for what it is (its parent gone, the disk full)
    // is that error, as the caller's own insert would have raised it.
    if (kind == RequestKind::Artifact && sqlstate.size() == 5 && sqlstate != "57P01" && sqlstate != "XX000")
      throw Failure(sqlstate.c_str(), "kvg: the artifact was not stored: " + error, {});
    writer_down("the audit writer did not commit it (" + error + ")", kind);
  }
  // What the writer added to this call (scripts/bench-audit.sh reads it).
  call([id, began, kind] {
    long seconds = 0;
    int micros = 0;
    TimestampDifference(began, GetCurrentTimestamp(), &seconds, &micros);
    elog(DEBUG1, "kvg: %s " INT64_FORMAT " committed by the audit writer in %ld us",
         kind == RequestKind::Artifact ? "artifact request" : "audit row", id, seconds * 1000000L + micros);
  });
  return id;
}

}  // namespace

int64_t append(const std::vector<SqlValue>& values) { return submit(RequestKind::AuditRow, encode_values(values)); }

bool store_artifact(const std::vector<SqlValue>& values) {
  return submit(RequestKind::Artifact, encode_values(values)) != 0;
}

}  // namespace kvg::pg::audit_writer

using namespace kvg::pg::audit_writer;

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
    Datum values[5] = {ObjectIdGetDatum(w.database), Int32GetDatum(w.pid),
                       CStringGetTextDatum(w.state == WriterState::Running ? "running" : "starting"),
                       Int64GetDatum(int64(w.rows)), Int64GetDatum(int64(w.commits))};
    bool nulls[5] = {false, w.pid == 0, false, false, false};
    tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
  }
  return Datum(0);
}

}
