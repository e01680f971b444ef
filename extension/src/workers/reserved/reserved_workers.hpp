// kvg's own background workers hold their slots from server start, so that
// no user's parallel query can take the slot an audit writer or a
// verification needs (docs/operations.md, "Worker slots"; docs/security.md,
// promise 4). A background worker that PostgreSQL starts per task (a
// dynamic one) competes with parallel workers for max_worker_processes; a
// worker registered at server start (a static one) keeps its slot while the
// server runs, even between its runs.
//
// So kvg registers, at server start, a pool of static workers for each kind
// it starts per task: kvg.audit_writer_workers audit writers (one runs one
// of a database's two writers, writer/writer.hpp) and kvg.verifier_workers verifiers
// (one runs one verification, verifier/verifier_worker.hpp). Each waits,
// idle and connected to no database, until a task is handed to it; runs the
// task's own main in that fresh process; and exits with status 1, so that
// the postmaster starts it again at once, idle, in the same slot. A task
// that finds its pool busy falls back to a dynamic worker, and a
// verification waits for a pooled one when there is no slot for that.
//
// Only C calls on plain data: the callers run them under pg::call.
#pragma once

#include <cstdint>
#include <optional>
#include <sys/types.h>

typedef uintptr_t Datum;  // postgres.h (same definition)

namespace kvg::pg::reserved {

enum class Pool : uint32_t { Writer = 1, Verifier = 2 };

// From _PG_init: kvg.audit_writer_workers and kvg.verifier_workers (both
// PGC_POSTMASTER: the pools are registered at server start).
void define_settings();

// From _PG_init under shared_preload_libraries: registers the pools'
// workers and requests their shared memory.
void setup_at_preload();

// A task handed to a pooled worker.
struct Handed {
  int index = -1;
  uint64_t task = 0;
  pid_t pid = 0;
};

// Hands `argument` (the task main's Datum) to an idle worker of `pool`;
// nullopt when every one is busy (or the pool is empty).
std::optional<Handed> hand_off(Pool pool, Datum argument);

// Whether the worker still runs the task (false once it exited).
bool running(const Handed& handed);

// Asks the worker that runs the task to stop (SIGTERM), if it still does.
void terminate(const Handed& handed);

// The status a task's main exits with: 1 in a pooled worker (the
// postmaster starts it again, idle), 0 in a dynamic one (it is gone).
int exit_status();

}  // namespace kvg::pg::reserved
