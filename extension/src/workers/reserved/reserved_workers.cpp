// The pools of kvg's workers registered at server start (reserved_workers.hpp).
#include "extension/src/workers/reserved/reserved_workers.hpp"

#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/wait_event.h"

PGDLLEXPORT void kvg_reserved_worker_main(Datum main_arg);
PGDLLEXPORT void kvg_audit_writer_main(Datum main_arg);
PGDLLEXPORT void kvg_verifier_main(Datum main_arg);
}

#include "extension/src/pg/shared_struct.hpp"

namespace kvg::pg::reserved {

namespace {

constexpr int kMaxWorkers = 64;

enum class State : uint32_t {
  Absent,  // not started, or exited: the postmaster starts it again
  Idle,    // waiting for a task
  Busy,    // running the task it was handed
};

struct Worker {
  Pool pool;
  State state;
  pid_t pid;
  Latch* latch;
  uint64_t task;  // the task it runs (Busy), numbered by Shared::tasks
  Datum argument;
};

struct Shared {
  LWLock* lock;  // every field below
  uint64_t tasks;
  Worker workers[kMaxWorkers];
};

int writer_workers = 2;
int verifier_workers = 2;
Shared* shared_memory = nullptr;
bool in_pooled_worker = false;

const SharedStruct kSharedMemory{"kvg reserved workers", "kvg_reserved", [] { return sizeof(Shared); },
                                 [](void* memory, LWLock* lock) { static_cast<Shared*>(memory)->lock = lock; },
                                 reinterpret_cast<void**>(&shared_memory)};

void register_worker(int index, Pool pool) {
  BackgroundWorker worker{};
  worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
  // A hot standby's verifications run too; its writers are never asked for.
  worker.bgw_start_time = BgWorkerStart_ConsistentState;
  worker.bgw_restart_time = 0;  // after each task, at once: a task ends in exit status 1
  strlcpy(worker.bgw_library_name, "kvg", BGW_MAXLEN);
  strlcpy(worker.bgw_function_name, "kvg_reserved_worker_main", BGW_MAXLEN);
  const char* type = pool == Pool::Writer ? "kvg audit writer" : "kvg verifier";
  snprintf(worker.bgw_name, BGW_MAXLEN, "%s (reserved %d)", type, index);
  strlcpy(worker.bgw_type, type, BGW_MAXLEN);
  worker.bgw_main_arg = Int32GetDatum(index);
  RegisterBackgroundWorker(&worker);
}

// The pool of worker `index`: writers first, then verifiers.
Pool pool_of(int index) { return index < writer_workers ? Pool::Writer : Pool::Verifier; }

// Whatever way the process ends, the task has ended: an asker sees it.
void mark_absent(int, Datum index) {
  if (!shared_memory) return;
  LWLockReleaseAll();
  LWLockAcquire(shared_memory->lock, LW_EXCLUSIVE);
  Worker& me = shared_memory->workers[DatumGetInt32(index)];
  if (me.pid == MyProcPid) {
    me.state = State::Absent;
    me.pid = 0;
    me.latch = nullptr;
  }
  LWLockRelease(shared_memory->lock);
}

}  // namespace

void define_settings() {
  // Server-start settings exist only where the server loads kvg at start
  // (a server without it refuses CREATE EXTENSION kvg: kvg.require_preload).
  if (!process_shared_preload_libraries_in_progress) return;
  DefineCustomIntVariable("kvg.audit_writer_workers",
                          "Audit writers kept at server start, each in a worker slot of its own.",
                          "One runs one writer at a time (a database has two: audit rows, artifacts); past them a "
                          "writer is a dynamic worker, which users' parallel queries can keep out "
                          "(docs/operations.md).",
                          &writer_workers, 2, 0, 32, PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("kvg.verifier_workers",
                          "Verifier workers kept at server start, each in a worker slot of its own.",
                          "One runs one function verification at a time (docs/operations.md).", &verifier_workers, 2,
                          0, 32, PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
}

void setup_at_preload() {
  request_shared_struct(kSharedMemory);
  for (int i = 0; i < writer_workers + verifier_workers; ++i) register_worker(i, pool_of(i));
}

std::optional<Handed> hand_off(Pool pool, Datum argument) {
  if (!shared_memory) return std::nullopt;
  std::optional<Handed> handed;
  Latch* latch = nullptr;
  LWLockAcquire(shared_memory->lock, LW_EXCLUSIVE);
  for (int i = 0; i < kMaxWorkers && !handed; ++i) {
    Worker& w = shared_memory->workers[i];
    if (w.pool != pool || w.state != State::Idle) continue;
    w.state = State::Busy;
    w.task = ++shared_memory->tasks;
    w.argument = argument;
    latch = w.latch;
    handed = Handed{i, w.task, w.pid};
  }
  LWLockRelease(shared_memory->lock);
  if (latch) SetLatch(latch);
  return handed;
}

bool running(const Handed& handed) {
  LWLockAcquire(shared_memory->lock, LW_SHARED);
  const Worker& w = shared_memory->workers[handed.index];
  const bool still = w.state == State::Busy && w.task == handed.task && w.pid == handed.pid;
  LWLockRelease(shared_memory->lock);
  return still;
}

void terminate(const Handed& handed) {
  if (running(handed)) kill(handed.pid, SIGTERM);
}

int exit_status() { return in_pooled_worker ? 1 : 0; }

}  // namespace kvg::pg::reserved

using kvg::pg::reserved::Pool;

// A pooled worker: idle until handed a task, then the task's own main. Plain
// C: nothing here throws.
void kvg_reserved_worker_main(Datum main_arg) {
  using namespace kvg::pg::reserved;
  const int index = DatumGetInt32(main_arg);
  pqsignal(SIGTERM, die);  // a shutdown, or a superuser's pg_terminate_backend: it starts again
  BackgroundWorkerUnblockSignals();
  if (!shared_memory || index < 0 || index >= kMaxWorkers) proc_exit(1);
  in_pooled_worker = true;
  before_shmem_exit(mark_absent, main_arg);
  LWLockAcquire(shared_memory->lock, LW_EXCLUSIVE);
  Worker& me = shared_memory->workers[index];
  me.pool = pool_of(index);
  me.state = State::Idle;
  me.pid = MyProcPid;
  me.latch = MyLatch;
  LWLockRelease(shared_memory->lock);
  Datum argument = 0;
  for (;;) {
    LWLockAcquire(shared_memory->lock, LW_SHARED);
    const bool handed = me.state == State::Busy;
    argument = me.argument;
    LWLockRelease(shared_memory->lock);
    if (handed) break;
    (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH, -1, PG_WAIT_EXTENSION);
    ResetLatch(MyLatch);
    CHECK_FOR_INTERRUPTS();
  }
  if (me.pool == Pool::Writer)
    kvg_audit_writer_main(argument);
  else
    kvg_verifier_main(argument);
  proc_exit(1);
}
