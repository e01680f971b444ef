// The audit writer, a background worker per database (audit_writer.hpp).
//
// It claims every queued request of its database: audit rows, which it
// inserts and links with kvg.audit_insert, and artifacts, which it stores
// with kvg.artifact_store (lo_store.hpp); all of them in one READ COMMITTED
// transaction of its own. It commits, and only then tells each caller its
// row's id. If that transaction fails,
// each row is tried again alone, so one bad row refuses only its own call.
// Written in C style on purpose: the PG_TRY frames here own no C++ object,
// so a PostgreSQL error never skips a destructor, and nothing here throws.
#include <cstring>

#include "extension/src/settings.hpp"
#include "extension/src/postgres.hpp"

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
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"
}

#include "extension/src/audit_row.hpp"
#include "extension/src/audit_writer_shmem.hpp"

namespace kvg::pg::audit_writer {

namespace {

// kvg.audit_insert with the row's values as text parameters (audit_row.hpp),
// made once when the writer starts: no C++ runs while a row is written.
std::string insert_statement;
// kvg.artifact_store's parameters, in lo_store.cpp's store_and_claim order;
// the content ($2) is bytea, the rest text. by_writer: this is the writer,
// which alone keeps each role's storage account (docs/security.md).
constexpr const char* kStoreArtifact =
    "SELECT kvg.artifact_store($1, $2, $3::integer, $4, $5, $6, $7, $8::name, $9, $10::name, $11::bigint, "
    "by_writer => true)";
constexpr int kArtifactParams = 11;
constexpr int kArtifactContent = 1;  // 0-based index of $2

struct Claimed {
  int slot;
  uint64_t request;
  RequestKind kind;
  dsm_segment* segment;
  int64_t id;
  bool ok;
};

struct Batch {
  Claimed rows[kMaxBatch];
  int count;
  char sqlstate[6];
  char error[kErrorBytes];
};

Writer* me = nullptr;  // this process's entry

// Under no lock: marks what this writer held as failed and gives its entry
// back, whatever way it exits (a FATAL, SIGTERM, idling out).
void give_back_at_exit(int, Datum) {
  Shared* sh = shared();
  if (!sh || !me) return;
  LWLockReleaseAll();  // an error may have left ours held
  LWLockAcquire(sh->lock, LW_EXCLUSIVE);
  // Only while this process still runs its database: after retiring, or as
  // a duplicate, the rows queued there are another writer's.
  if (me->pid != MyProcPid || me->state != WriterState::Running || me->database != MyDatabaseId) {
    LWLockRelease(sh->lock);
    return;
  }
  for (int i = 0; i < sh->slot_count; ++i) {
    Slot& s = sh->slots[i];
    if (s.database != MyDatabaseId) continue;
    if (s.state == SlotState::Abandoned) {
      s.state = SlotState::Free;
    } else if (s.state == SlotState::Queued || s.state == SlotState::Claimed) {
      s.state = SlotState::Failed;
      s.sqlstate[0] = '\0';
      strlcpy(s.error, "the audit writer stopped before committing it", sizeof(s.error));
      SetLatch(s.caller);
    }
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
    if ((w.state == WriterState::Starting || w.state == WriterState::Running) && w.database == MyDatabaseId)
      entry = &w;
  const bool other = entry && entry->state == WriterState::Running && entry->pid != MyProcPid;
  if (!entry)
    for (Writer& w : sh->writers)
      if (!entry && w.state == WriterState::Free) entry = &w;
  if (entry && !other) {
    *entry = Writer{MyDatabaseId, WriterState::Running, MyProcPid, MyLatch, GetCurrentTimestamp(), 0, 0};
    me = entry;
  }
  LWLockRelease(sh->lock);
  return me != nullptr;
}

// Claims up to kMaxBatch queued rows and attaches their segments, under the
// lock, so a caller that gives up meanwhile sees them claimed (its segment
// then lives until we detach).
void claim(Batch& batch) {
  Shared* sh = shared();
  batch.count = 0;
  LWLockAcquire(sh->lock, LW_EXCLUSIVE);
  for (int i = 0; i < sh->slot_count && batch.count < kMaxBatch; ++i) {
    Slot& s = sh->slots[i];
    if (s.state != SlotState::Queued || s.database != MyDatabaseId) continue;
    dsm_segment* segment = dsm_attach(s.payload);
    if (!segment) {  // the caller is gone already
      s.state = SlotState::Failed;
      s.sqlstate[0] = '\0';
      strlcpy(s.error, "its request vanished", sizeof(s.error));
      SetLatch(s.caller);
      continue;
    }
    s.state = SlotState::Claimed;
    batch.rows[batch.count++] = Claimed{i, s.request, s.kind, segment, 0, false};
  }
  LWLockRelease(sh->lock);
}

// Under no lock: false when rows were queued meanwhile; otherwise the entry
// is given back and this writer may exit.
bool retire_if_idle() {
  Shared* sh = shared();
  bool idle = true;
  LWLockAcquire(sh->lock, LW_EXCLUSIVE);
  for (int i = 0; i < sh->slot_count && idle; ++i)
    if (sh->slots[i].state == SlotState::Queued && sh->slots[i].database == MyDatabaseId) idle = false;
  if (idle) me->state = WriterState::Free;
  LWLockRelease(sh->lock);
  return idle;
}

// One request: its segment's values as the parameters of kInsert (an audit
// row) or kStoreArtifact (an artifact), whose result is its id.
int64_t run_request(RequestKind kind, dsm_segment* segment) {
  const bool artifact = kind == RequestKind::Artifact;
  constexpr int kParams = kAuditColumnCount > kArtifactParams ? kAuditColumnCount : kArtifactParams;
  const int count = artifact ? kArtifactParams : kAuditColumnCount;
  const char* p = static_cast<const char*>(dsm_segment_address(segment));
  const char* end = p + dsm_segment_map_length(segment);
  auto get32 = [&p, end]() {
    uint32_t n = 0;
    if (end - p < int(sizeof(n))) elog(ERROR, "kvg audit writer: truncated request");
    std::memcpy(&n, p, sizeof(n));
    p += sizeof(n);
    return n;
  };
  if (get32() != uint32_t(count)) elog(ERROR, "kvg audit writer: a request of another version");
  Oid types[kParams];
  Datum values[kParams];
  char nulls[kParams];
  for (int i = 0; i < count; ++i) {
    if (end - p < 1) elog(ERROR, "kvg audit writer: truncated request");
    const bool present = *p++ != 0;
    const uint32_t n = get32();
    if (uint32_t(end - p) < n) elog(ERROR, "kvg audit writer: truncated request");
    // text and bytea are both a varlena of the bytes.
    types[i] = artifact && i == kArtifactContent ? BYTEAOID : TEXTOID;
    values[i] = present ? PointerGetDatum(cstring_to_text_with_len(p, int(n))) : Datum(0);
    nulls[i] = present ? ' ' : 'n';
    p += n;
  }
  const int rc = SPI_execute_with_args(artifact ? kStoreArtifact : insert_statement.c_str(), count, types, values,
                                       nulls, false, 1);
  if (rc != SPI_OK_SELECT || SPI_processed != 1) elog(ERROR, "kvg audit writer: its statement failed (%d)", rc);
  bool isnull = true;
  const Datum id = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
  if (isnull) elog(ERROR, "kvg audit writer: its statement returned no id");
  return DatumGetInt64(id);
}

// Inserts rows [first, first + n) in one transaction; true when it committed.
bool write(Batch& batch, int first, int n) {
  MemoryContext context = CurrentMemoryContext;
  volatile bool committed = false;
  PG_TRY();
  {
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "kvg audit writer: SPI_connect failed");
    PushActiveSnapshot(GetTransactionSnapshot());
    pgstat_report_activity(STATE_RUNNING, "kvg audit writer: appending rows and storing artifacts");
    for (int i = first; i < first + n; ++i)
      batch.rows[i].id = run_request(batch.rows[i].kind, batch.rows[i].segment);
    SPI_finish();
    PopActiveSnapshot();
    CommitTransactionCommand();
    committed = true;
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(context);
    ErrorData* error = CopyErrorData();
    FlushErrorState();
    AbortCurrentTransaction();
    strlcpy(batch.error, error->message ? error->message : "unknown error", sizeof(batch.error));
    strlcpy(batch.sqlstate, unpack_sql_state(error->sqlerrcode), sizeof(batch.sqlstate));
    ereport(LOG, (errmsg("kvg audit writer: %d row(s) not written: %s", n, batch.error)));
    FreeErrorData(error);
  }
  PG_END_TRY();
  pgstat_report_activity(STATE_IDLE, nullptr);
  for (int i = first; i < first + n; ++i) batch.rows[i].ok = committed;
  return committed;
}

// Tells every caller of the batch, and lets go of the segments.
void answer(Batch& batch) {
  Shared* sh = shared();
  LWLockAcquire(sh->lock, LW_EXCLUSIVE);
  for (int i = 0; i < batch.count; ++i) {
    Slot& s = sh->slots[batch.rows[i].slot];
    if (s.request != batch.rows[i].request) continue;  // its backend is gone; another uses the slot
    if (s.state == SlotState::Abandoned) {
      s.state = SlotState::Free;
      continue;
    }
    s.state = batch.rows[i].ok ? SlotState::Done : SlotState::Failed;
    s.id = batch.rows[i].id;
    if (batch.rows[i].ok) {
      s.error[0] = '\0';
      s.sqlstate[0] = '\0';
    } else {
      strlcpy(s.error, batch.error, sizeof(s.error));
      strlcpy(s.sqlstate, batch.sqlstate, sizeof(s.sqlstate));
    }
    SetLatch(s.caller);
  }
  me->rows += uint64_t(batch.count);
  me->commits += 1;
  LWLockRelease(sh->lock);
  for (int i = 0; i < batch.count; ++i) dsm_detach(batch.rows[i].segment);
}

}  // namespace

}  // namespace kvg::pg::audit_writer

using namespace kvg::pg::audit_writer;

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
  const Oid db = DatumGetObjectId(main_arg);
  if (!shared() || database_dropped(db)) proc_exit(0);
  insert_statement = kvg::pg::audit_insert_statement();
  BackgroundWorkerInitializeConnectionByOid(db, InvalidOid, 0);
  // Its own transactions are short and always READ COMMITTED, read-write,
  // whatever the database's defaults (kvg.audit_insert relies on it).
  SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET, PGC_S_OVERRIDE);
  SetConfigOption("default_transaction_read_only", "off", PGC_SUSET, PGC_S_OVERRIDE);
  before_shmem_exit(give_back_at_exit, Datum(0));
  if (!take_entry()) proc_exit(0);  // another writer runs this database
  pgstat_report_appname("kvg audit writer");

  static Batch batch;
  TimestampTz idle_since = GetCurrentTimestamp();
  for (;;) {
    ResetLatch(MyLatch);
    if (ProcDiePending) break;
    if (ConfigReloadPending) {
      ConfigReloadPending = false;
      ProcessConfigFile(PGC_SIGHUP);
    }
    claim(batch);
    if (batch.count == 0) {
      const int idle_ms = kvg::pg::settings::audit_writer_idle_ms();
      if (TimestampDifferenceExceeds(idle_since, GetCurrentTimestamp(), idle_ms) && retire_if_idle()) break;
      (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, idle_ms, PG_WAIT_EXTENSION);
      continue;
    }
    if (!write(batch, 0, batch.count) && batch.count > 1)
      for (int i = 0; i < batch.count; ++i) (void)write(batch, i, 1);
    answer(batch);
    idle_since = GetCurrentTimestamp();
  }
  proc_exit(0);
}

}
