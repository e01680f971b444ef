#include "extension/src/calls/call_progress.hpp"

#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/pg/shared_struct.hpp"
#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "catalog/pg_authid.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}

namespace kvg::pg::call_progress {

struct Slot {
  // Odd while its backend writes it (pgstat's st_changecount protocol).
  volatile uint32 changecount;
  pid_t pid;  // 0: no generation
  Oid user;
  Oid database;
  int32 phase;
  int64 prompt_tokens, prompt_done, max_tokens, decoded;
  TimestampTz started;
};

namespace {

struct Shared {
  LWLock* lock;  // unused: each slot has one writer
  int slot_count;
  Slot slots[FLEXIBLE_ARRAY_MEMBER];
};

Shared* shared_memory = nullptr;
const SharedStruct kSharedMemory = per_process_struct("kvg call progress", "kvg call progress", &shared_memory);

// Runs `change` on the slot between the two increments of its change count.
template <typename F>
void write(Slot* slot, F&& change) {
  if (!slot) return;
  ++slot->changecount;
  pg_write_barrier();
  change(*slot);
  pg_write_barrier();
  ++slot->changecount;
}

// A consistent copy of `slot`, read while its backend may write it.
Slot read(const Slot& slot) {
  for (;;) {
    const uint32 before = slot.changecount;
    pg_read_barrier();
    Slot copy;
    copy.pid = slot.pid;
    copy.user = slot.user;
    copy.database = slot.database;
    copy.phase = slot.phase;
    copy.prompt_tokens = slot.prompt_tokens;
    copy.prompt_done = slot.prompt_done;
    copy.max_tokens = slot.max_tokens;
    copy.decoded = slot.decoded;
    copy.started = slot.started;
    pg_read_barrier();
    if (before % 2 == 0 && before == slot.changecount) return copy;
    CHECK_FOR_INTERRUPTS();
  }
}

const char* phase_name(int32 phase) {
  switch (static_cast<Phase>(phase)) {
    case Phase::Queued: return "queued";
    case Phase::Prefill: return "prefill";
    case Phase::Decode: return "decode";
    case Phase::Idle: break;
  }
  return "idle";
}

}  // namespace

void setup_at_preload() { request_shared_struct(kSharedMemory); }

namespace {

// A backend that ends inside a call (pg_terminate_backend while it waits
// for the engine worker: a FATAL, which unwinds no C++ frame, so ~Tracker
// never runs) clears its slot on its way out: kvg.progress shows no call of
// a gone process.
void clear_at_exit(int, Datum) {
  if (shared_memory && MyProc) write(&shared_memory->slots[MyProc->pgprocno], [](Slot& s) { s.pid = 0; });
}

}  // namespace

Tracker::Tracker(int64_t prompt_tokens, int64_t max_tokens, Phase first)
    : slot_(shared_memory && MyProc ? &shared_memory->slots[MyProc->pgprocno] : nullptr) {
  static bool exit_hook = false;
  if (slot_ && !exit_hook) {
    call([] { before_shmem_exit(clear_at_exit, Datum(0)); });
    exit_hook = true;
  }
  const TimestampTz now = GetCurrentTimestamp();
  write(slot_, [&](Slot& s) {
    s.pid = MyProcPid;
    s.user = GetUserId();
    s.database = MyDatabaseId;
    s.phase = int32(first);
    s.prompt_tokens = prompt_tokens;
    s.prompt_done = 0;
    s.max_tokens = max_tokens;
    s.decoded = 0;
    s.started = now;
  });
}

Tracker::~Tracker() {
  write(slot_, [](Slot& s) { s.pid = 0; });
}

void Tracker::phase(Phase phase) {
  write(slot_, [phase](Slot& s) { s.phase = int32(phase); });
}

void Tracker::prefilled(int64_t tokens) {
  write(slot_, [tokens](Slot& s) {
    s.phase = int32(Phase::Prefill);
    s.prompt_done = tokens;
  });
}

void Tracker::decoded(int64_t tokens) {
  write(slot_, [tokens](Slot& s) {
    s.phase = int32(Phase::Decode);
    s.prompt_done = s.prompt_tokens;
    s.decoded = tokens;
  });
}

}  // namespace kvg::pg::call_progress

using kvg::pg::call_progress::Slot;

extern "C" {

// kvg_progress(): one row per backend running a generation: pid, database,
// phase and how far. As pg_stat_progress_* shows other users' commands,
// another role's figures are NULL unless the caller has pg_read_all_stats
// or kvg_auditor. Plain C: nothing to unwind.
PG_FUNCTION_INFO_V1(kvg_progress);
Datum kvg_progress(PG_FUNCTION_ARGS) {
  InitMaterializedSRF(fcinfo, 0);
  ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  using kvg::pg::call_progress::shared_memory;
  if (!shared_memory) return Datum(0);
  const Oid auditor = get_role_oid("kvg_auditor", true);
  const bool sees_all = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS) ||
                        (OidIsValid(auditor) && has_privs_of_role(GetUserId(), auditor));
  for (int i = 0; i < shared_memory->slot_count; ++i) {
    const Slot s = kvg::pg::call_progress::read(shared_memory->slots[i]);
    if (s.pid == 0) continue;
    const bool sees = sees_all || has_privs_of_role(GetUserId(), s.user);
    Datum values[8] = {Int32GetDatum(s.pid),
                       ObjectIdGetDatum(s.database),
                       CStringGetTextDatum(kvg::pg::call_progress::phase_name(s.phase)),
                       Int64GetDatum(s.prompt_tokens),
                       Int64GetDatum(s.prompt_done),
                       Int64GetDatum(s.max_tokens),
                       Int64GetDatum(s.decoded),
                       TimestampTzGetDatum(s.started)};
    bool nulls[8] = {};
    for (int c = 2; c < 8 && !sees; ++c) nulls[c] = true;  // pid and database are everyone's to see
    tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
  }
  return Datum(0);
}

}
