// kvg's writer, a background worker per database (writer.hpp).
//
// It claims every queued request of its database, each a registered
// statement and its parameters (writer_statements.hpp), and runs all of
// them in one READ COMMITTED transaction of its own. It commits, and only
// then answers each caller with its statement's result. If that transaction
// fails, each request is tried again alone, so one bad request refuses only
// its own call.
//
// Written in C style on purpose: the PG_TRY frames here own no C++ object,
// so a PostgreSQL error never skips a destructor, and nothing in them
// throws. The one C++ step that may throw, decoding a request, runs outside
// them and outside the lock, and a request that does not decode fails alone.
#include <cstring>
#include <exception>

#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "tcop/tcopprot.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/procsignal.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"
}

#include "extension/src/spi/spi.hpp"
#include "extension/src/workers/protocol/wire.hpp"
#include "extension/src/workers/segment/toc_segment.hpp"
#include "extension/src/workers/writer/writer.hpp"
#include "extension/src/workers/reserved/reserved_workers.hpp"
#include "extension/src/workers/writer/writer_shmem.hpp"
#include "extension/src/workers/writer/writer_statements.hpp"

namespace kvg::pg::writer {

namespace {

using worker_protocol::SlotState;
using worker_protocol::WriterReply;
using worker_protocol::WriterRequest;

struct Claimed {
  int slot;
  uint64_t request;
  dsm_segment* segment;
  WriterRequest asked;           // its values are views into `segment`
  const Statement* statement;    // nullptr when the request was refused before it ran
  int64_t result;
  bool ok;
  char sqlstate[6];              // of the error that failed it
  char error[WriterReply::kMaxErrorBytes + 1];
};

struct Batch {
  Claimed rows[kMaxBatch];
  int count;
};

Writer* me = nullptr;  // this process's entry
Lane my_lane = Lane::Rows;

// Whether slot `s` holds a request for this writer: its database and lane.
bool mine(const Slot& s) { return s.database == MyDatabaseId && s.lane == my_lane; }

void fail_row(Claimed& row, const char* sqlstate, const char* error) {
  row.ok = false;
  strlcpy(row.sqlstate, sqlstate, sizeof(row.sqlstate));
  strlcpy(row.error, error, sizeof(row.error));
}

// Under the lock: the caller's answer, in its slot.
void put_reply(Slot& slot, const WriterReply& reply) noexcept {
  // Never too long: WriterReply::failed() cuts the error to fit the slot.
  worker_protocol::encode_framed(reply, slot.reply, sizeof(slot.reply));
}

// Under no lock: marks what this writer held as failed and gives its entry
// back, whatever way it exits (a FATAL, SIGTERM, idling out).
void give_back_at_exit(int, Datum) {
  Shared* sh = shared();
  if (!sh || !me) return;
  LWLockReleaseAll();  // an error may have left ours held
  LWLockAcquire(sh->lock, LW_EXCLUSIVE);
  // Only while this process still runs its database: after retiring, or as
  // a duplicate, the requests queued there are another writer's.
  if (me->pid != MyProcPid || me->state != WriterState::Running || me->database != MyDatabaseId ||
      me->lane != my_lane) {
    LWLockRelease(sh->lock);
    return;
  }
  for (int i = 0; i < sh->slot_count; ++i) {
    Slot& s = sh->slots[i];
    if (!mine(s) || !s.request.fail_unanswered()) continue;
    put_reply(s, WriterReply::failed("", "the audit writer stopped before committing it"));
    SetLatch(s.caller);
  }
  me->state = WriterState::Free;
  LWLockRelease(sh->lock);
}

// Whether DROP DATABASE stopped this database's writer (then this one, a
// restart of it, must not try to connect to what is gone).
bool database_dropped(Oid db) {
  Shared* sh = shared();
  bool dropped = false;
  LWLockAcquire(sh->lock, LW_SHARED);
  for (const Writer& w : sh->writers)
    if (w.state == WriterState::Dropped && w.database == db) dropped = true;
  LWLockRelease(sh->lock);
  return dropped;
}

// Takes this database's entry; false when another writer already runs it.
bool take_entry() {
  Shared* sh = shared();
  LWLockAcquire(sh->lock, LW_EXCLUSIVE);
  Writer* entry = nullptr;
  for (Writer& w : sh->writers)
    if ((w.state == WriterState::Starting || w.state == WriterState::Running) && w.database == MyDatabaseId &&
        w.lane == my_lane)
      entry = &w;
  const bool other = entry && entry->state == WriterState::Running && entry->pid != MyProcPid;
  if (!entry)
    for (Writer& w : sh->writers)
      if (!entry && w.state == WriterState::Free) entry = &w;
  if (entry && !other) {
    *entry = Writer{MyDatabaseId, my_lane, WriterState::Running, MyProcPid, MyLatch, GetCurrentTimestamp(), 0, 0};
    me = entry;
  }
  LWLockRelease(sh->lock);
  return me != nullptr;
}

// The claimed request's statement and values, read from its segment
// (writer_shmem.hpp: RequestKey); a request that does not read as one, or names
// no statement or the wrong number of values, fails alone (the others run).
void read_request(Claimed& row) noexcept {
  row.statement = nullptr;
  try {
    row.asked = toc_segment::read_framed<WriterRequest>(row.segment, kRequestMagic, kRequestKey);
    const Statement* statement = find_statement(row.asked.statement);
    if (!statement) return fail_row(row, "XX000", "its request names no statement this writer knows");
    if (row.asked.values.size() != statement->parameters.size())
      return fail_row(row, "XX000", "its request has another number of values than its statement");
    row.statement = statement;
  } catch (const std::exception& e) {
    fail_row(row, "XX000", e.what());
  }
}

// Claims up to kMaxBatch queued requests and attaches their segments, under
// the lock, so a caller that gives up meanwhile sees them claimed (its
// segment then lives until we detach); then reads them, outside it.
void claim(Batch& batch) {
  Shared* sh = shared();
  batch.count = 0;
  LWLockAcquire(sh->lock, LW_EXCLUSIVE);
  for (int i = 0; i < sh->slot_count && batch.count < kMaxBatch; ++i) {
    Slot& s = sh->slots[i];
    if (s.request.state != SlotState::Queued || !mine(s)) continue;
    const uint64_t request = *s.request.claim();
    dsm_segment* segment = dsm_attach(s.payload);
    if (!segment) {  // the caller is gone already
      (void)s.request.answer(request, false);
      put_reply(s, WriterReply::failed("", "its request vanished"));
      SetLatch(s.caller);
      continue;
    }
    Claimed& row = batch.rows[batch.count++];
    row.slot = i;
    row.request = request;
    row.segment = segment;
    row.result = 0;
    row.ok = false;
  }
  LWLockRelease(sh->lock);
  for (int i = 0; i < batch.count; ++i) read_request(batch.rows[i]);
}

// Under no lock: false when requests were queued meanwhile; otherwise the
// entry is given back and this writer may exit.
bool retire_if_idle() {
  Shared* sh = shared();
  bool idle = true;
  LWLockAcquire(sh->lock, LW_EXCLUSIVE);
  for (int i = 0; i < sh->slot_count && idle; ++i)
    if (sh->slots[i].request.state == SlotState::Queued && mine(sh->slots[i])) idle = false;
  if (idle) me->state = WriterState::Free;
  LWLockRelease(sh->lock);
  return idle;
}

// The statements' plans, prepared once in this process and kept, so that a
// row costs no parse and plan of its statement; the plan cache revalidates
// a kept plan as extension/src/spi/kept_plans.hpp says. A fixed table: the
// statements are a handful, and nothing here may throw.
struct KeptPlan {
  const Statement* statement;
  SPIPlanPtr plan;
};
KeptPlan kept_plans[8];

SPIPlanPtr plan_of(const Statement& statement, int count, Oid* types) {
  KeptPlan* free_entry = nullptr;
  for (KeptPlan& kept : kept_plans) {
    if (kept.statement == &statement) return kept.plan;
    if (!kept.statement && !free_entry) free_entry = &kept;
  }
  const SPIPlanPtr plan = SPI_prepare(statement.sql.c_str(), count, types);
  if (!plan) elog(ERROR, "kvg audit writer: cannot prepare its statement (%s)", SPI_result_code_string(SPI_result));
  if (free_entry) {  // else more statements than entries: this one is prepared per run, in SPI's memory
    if (SPI_keepplan(plan) != 0) elog(ERROR, "kvg audit writer: cannot keep its statement's plan");
    *free_entry = {&statement, plan};
  }
  return plan;
}

// One request: its statement with its values as parameters (each a varlena
// of its bytes: text and bytea alike), whose one value is its result.
int64_t run_request(const Claimed& row) {
  const Statement& statement = *row.statement;
  const int count = int(statement.parameters.size());
  Oid* types = static_cast<Oid*>(palloc(sizeof(Oid) * size_t(count + 1)));
  Datum* values = static_cast<Datum*>(palloc(sizeof(Datum) * size_t(count + 1)));
  char* nulls = static_cast<char*>(palloc(size_t(count + 1)));
  for (int i = 0; i < count; ++i) {
    const std::optional<std::string_view>& value = row.asked.values[size_t(i)];
    types[i] = statement.parameters[size_t(i)] == ParameterType::Bytea ? BYTEAOID : TEXTOID;
    values[i] = value ? PointerGetDatum(cstring_to_text_with_len(value->data(), int(value->size()))) : Datum(0);
    nulls[i] = value ? ' ' : 'n';
  }
  const int rc = SPI_execute_plan(plan_of(statement, count, types), values, nulls, false, 1);
  if (rc != SPI_OK_SELECT || SPI_processed != 1) elog(ERROR, "kvg audit writer: its statement failed (%d)", rc);
  bool isnull = true;
  const Datum result = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
  if (isnull) elog(ERROR, "kvg audit writer: its statement returned no id");
  return DatumGetInt64(result);
}

// Runs the readable requests among [first, first + n) in one transaction;
// false when it did not commit (each of them then failed with its error).
bool write(Batch& batch, int first, int n) {
  MemoryContext context = CurrentMemoryContext;
  volatile bool committed = false;
  PG_TRY();
  {
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "kvg audit writer: SPI_connect failed");
    PushActiveSnapshot(GetTransactionSnapshot());
    pgstat_report_activity(STATE_RUNNING, "kvg audit writer: running its statements");
    for (int i = first; i < first + n; ++i)
      if (batch.rows[i].statement) batch.rows[i].result = run_request(batch.rows[i]);
    SPI_finish();
    PopActiveSnapshot();
    CommitTransactionCommand();
    committed = true;
    // A background worker reports its tables' changes itself (a backend does
    // when idle); unreported, autovacuum never learns of the dead versions of
    // kvg.audit_head, which every audit row updates, and the head's table
    // grows without end, each row's link slower than the last (it reached
    // 74 MB and 300 rows/s at 600,000 rows). At most once a second here; the
    // rest when the writer goes idle.
    pgstat_report_stat(false);
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(context);
    ErrorData* error = CopyErrorData();
    FlushErrorState();
    AbortCurrentTransaction();
    const char* message = error->message ? error->message : "unknown error";
    for (int i = first; i < first + n; ++i)
      if (batch.rows[i].statement) fail_row(batch.rows[i], unpack_sql_state(error->sqlerrcode), message);
    ereport(LOG, (errmsg("kvg audit writer: %d request(s) not written: %s", n, message)));
    FreeErrorData(error);
  }
  PG_END_TRY();
  pgstat_report_activity(STATE_IDLE, nullptr);
  if (committed)
    for (int i = first; i < first + n; ++i)
      if (batch.rows[i].statement) batch.rows[i].ok = true;
  return committed;
}

// Tells every caller of the batch, and lets go of the segments.
void answer(Batch& batch) {
  Shared* sh = shared();
  LWLockAcquire(sh->lock, LW_EXCLUSIVE);
  for (int i = 0; i < batch.count; ++i) {
    const Claimed& row = batch.rows[i];
    Slot& s = sh->slots[row.slot];
    // False when its caller gave up (the slot is free again) or is gone
    // (another request uses the slot).
    if (!s.request.answer(row.request, row.ok)) continue;
    put_reply(s, row.ok ? WriterReply{row.result, "", ""} : WriterReply::failed(row.sqlstate, row.error));
    SetLatch(s.caller);
  }
  me->rows += uint64_t(batch.count);
  me->commits += 1;
  LWLockRelease(sh->lock);
  for (int i = 0; i < batch.count; ++i) dsm_detach(batch.rows[i].segment);
}

}  // namespace

}  // namespace kvg::pg::writer

using namespace kvg::pg::writer;

extern "C" {

PGDLLEXPORT void kvg_audit_writer_main(Datum main_arg);

void kvg_audit_writer_main(Datum main_arg) {
  // SIGTERM (pg_terminate_backend, DROP DATABASE, shutdown): while idle the
  // loop exits cleanly (0: not restarted); while writing, the wait it is in
  // ends with FATAL, the transaction rolls back, its callers are refused,
  // and the postmaster restarts the writer (1 s).
  pqsignal(SIGTERM, die);
  pqsignal(SIGHUP, SignalHandlerForConfigReload);
  BackgroundWorkerUnblockSignals();
  const Oid db = argument_database(main_arg);
  my_lane = argument_lane(main_arg);
  if (!shared() || database_dropped(db)) proc_exit(kvg::pg::reserved::exit_status());
  BackgroundWorkerInitializeConnectionByOid(db, InvalidOid, 0);
  // Its own transactions are short and always READ COMMITTED, read-write,
  // whatever the database's defaults (kvg.audit_insert relies on it).
  SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET, PGC_S_OVERRIDE);
  SetConfigOption("default_transaction_read_only", "off", PGC_SUSET, PGC_S_OVERRIDE);
  // Its statements resolve names as every statement of kvg does (spi.hpp),
  // whatever search_path a database owner set for the database.
  SetConfigOption("search_path", kvg::pg::kPinnedSearchPath, PGC_SUSET, PGC_S_OVERRIDE);
  before_shmem_exit(give_back_at_exit, Datum(0));
  if (!take_entry()) proc_exit(kvg::pg::reserved::exit_status());  // another writer runs this database's lane
  pgstat_report_appname("kvg audit writer");

  static Batch batch;
  TimestampTz idle_since = GetCurrentTimestamp();
  for (;;) {
    ResetLatch(MyLatch);
    if (ProcDiePending) break;
    // DROP DATABASE (of any database) and the like wait until every process
    // has absorbed their barrier, which CHECK_FOR_INTERRUPTS() does; idle,
    // this loop reaches none, and DROP DATABASE waited for the writer's idle
    // timeout (60 s). So it absorbs them here, as PostgreSQL's own loops do.
    if (ProcSignalBarrierPending) ProcessProcSignalBarrier();
    if (ConfigReloadPending) {
      ConfigReloadPending = false;
      ProcessConfigFile(PGC_SIGHUP);
    }
    claim(batch);
    if (batch.count == 0) {
      pgstat_report_stat(true);  // what the last commits left unreported
      const int idle_ms = kvg::pg::writer::idle_ms();
      if (TimestampDifferenceExceeds(idle_since, GetCurrentTimestamp(), idle_ms) && retire_if_idle()) break;
      (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, idle_ms, PG_WAIT_EXTENSION);
      continue;
    }
    if (!write(batch, 0, batch.count) && batch.count > 1)
      for (int i = 0; i < batch.count; ++i) (void)write(batch, i, 1);
    answer(batch);
    idle_since = GetCurrentTimestamp();
  }
  proc_exit(kvg::pg::reserved::exit_status());
}

}
