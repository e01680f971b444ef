// The shared memory between audited calls and the audit writers
// (audit_writer.hpp): one writer entry per database whose writer runs, and
// one request slot per row in flight. Only audit_writer.cpp (the calls'
// side) and audit_writer_main.cpp (the worker) include this; both include
// postgres.hpp first.
#pragma once

#include <cstdint>

namespace kvg::pg::audit_writer {

// Databases that may have a writer at once: each takes one of the server's
// max_worker_processes while it runs (writers stop when idle).
inline constexpr int kMaxWriters = 32;
// Rows one writer commits together at most.
inline constexpr int kMaxBatch = 64;
inline constexpr int kErrorBytes = 256;

enum class WriterState : uint32_t {
  Free,      // no writer for this entry's database
  Starting,  // registered by a call, not yet connected
  Running,   // connected and taking rows
  Dropped,   // DROP DATABASE stopped it: a restart of it must not connect
};

struct Writer {
  Oid database;
  WriterState state;
  pid_t pid;
  Latch* latch;              // the writer's, set when a row is queued
  TimestampTz since;         // when it entered its state
  uint64_t rows, commits;    // written since it started
};

enum class SlotState : uint32_t {
  Free,
  Queued,     // the caller's row waits in its DSM segment
  Claimed,    // the writer has attached the segment and is writing the row
  Done,       // committed: id is the row's
  Failed,     // not written (error says why); the writer's transaction rolled back
  Abandoned,  // the caller stopped waiting (cancel, statement_timeout) while Claimed
};

// What a request asks of the writer (audit_writer.hpp).
enum class RequestKind : uint32_t {
  AuditRow,  // kvg.audit_insert's parameters
  Artifact,  // kvg.artifact_store's parameters, the content among them (lo_store.hpp)
};

// One per PGPROC (a backend has at most one request in flight), so a backend
// that exits while waiting leaks nothing: the next one on its PGPROC reuses
// the slot. `request` tells the rows of successive backends apart.
struct Slot {
  SlotState state;
  uint64_t request;
  RequestKind kind;
  Oid database;
  dsm_handle payload;  // the request's values (audit_writer.cpp: encode_values)
  Latch* caller;
  int64_t id;
  char sqlstate[6];  // of the error that failed it, for the caller to raise
  char error[kErrorBytes];
};

struct Shared {
  LWLock* lock;  // every field of every entry and slot
  int slot_count;
  Writer writers[kMaxWriters];
  Slot slots[FLEXIBLE_ARRAY_MEMBER];
};

// Attached by shmem_startup_hook in every process; nullptr when kvg was not
// preloaded (no shared memory was requested).
Shared* shared();

}  // namespace kvg::pg::audit_writer
