// The shared memory between callers and kvg's writers (workers/writer/
// writer.hpp): one writer entry per database whose writer runs, and one
// request slot per process (protocol/request_slot.hpp). Only writer.cpp (the
// calls' side) and writer_main.cpp (the worker) include this; both include
// postgres.hpp first.
#pragma once

#include <cstdint>

#include "extension/src/workers/protocol/request_slot.hpp"
#include "extension/src/workers/protocol/writer_messages.hpp"
#include "extension/src/workers/writer/writer_statements.hpp"

namespace kvg::pg::writer {

// Writers that may run at once (a database has one per lane,
// writer_statements.hpp): each takes one of the server's worker slots while
// it runs (writers stop when idle).
inline constexpr int kMaxWriters = 64;
// Requests one writer commits together at most.
inline constexpr int kMaxBatch = 64;

enum class WriterState : uint32_t {
  Free,      // no writer for this entry's database
  Starting,  // registered by a call, not yet connected
  Running,   // connected and taking requests
  Dropped,   // DROP DATABASE stopped it: a restart of it must not connect
};

struct Writer {
  Oid database;
  Lane lane;
  WriterState state;
  pid_t pid;
  Latch* latch;              // the writer's, set when a request is queued
  TimestampTz since;         // when it entered its state
  uint64_t rows, commits;    // requests written, transactions committed, since it started
};

// One per PGPROC (a process has at most one request in flight), so a process
// that exits while waiting leaks nothing: the next one on its PGPROC reuses
// the slot, under another request id.
struct Slot {
  worker_protocol::RequestSlot request;  // its state and id (request_slot.hpp)
  Oid database;
  Lane lane;           // the writer of database and lane takes it
  dsm_handle payload;  // the request's segment (below)
  Latch* caller;
  // Once Done or Failed: the writer's framed WriterReply (the statement's
  // result, or why it was not committed).
  char reply[worker_protocol::WriterReply::kFramedBytes];
};

// A request's segment, laid out by shm_toc: one framed WriterRequest.
inline constexpr uint64_t kRequestMagic = 0x6b765752;  // "kvWR"
enum RequestKey : uint64_t { kRequestKey = 1 };

struct Shared {
  LWLock* lock;  // every field of every entry and slot
  int slot_count;
  Writer writers[kMaxWriters];
  Slot slots[FLEXIBLE_ARRAY_MEMBER];
};

// A writer's main_arg: its database and lane.
inline Datum writer_argument(Oid database, Lane lane) {
  return Datum(uint64_t(database) | (uint64_t(lane) << 32));
}
inline Oid argument_database(Datum argument) { return Oid(uint64_t(argument) & 0xffffffffu); }
inline Lane argument_lane(Datum argument) { return Lane(uint32_t(uint64_t(argument) >> 32)); }
inline const char* lane_name(Lane lane) { return lane == Lane::Artifacts ? "artifacts" : "rows"; }

// Attached by shmem_startup_hook in every process; nullptr when kvg was not
// preloaded (no shared memory was requested).
Shared* shared();

}  // namespace kvg::pg::writer
