// The shared memory between backends and the engine worker
// (engine_worker.hpp): the worker's identity and figures, and one request
// slot per PGPROC. Only engine_worker.cpp (the calls' side) and
// engine_worker_main.cpp (the worker) include this; both include postgres.hpp
// first.
#pragma once

#include <cstdint>

#include "extension/src/workers/protocol/request_slot.hpp"

namespace kvg::pg::engine_worker {

// The reply queue of one call: small, so that a backend that stops reading
// (a stopped process, say) holds back only its own sequence, which the
// worker then leaves out of its passes until the queue drains. A call that
// gets chain links back (artifacts of many KV rows) has a larger one.
inline constexpr size_t kReplyQueueBytes = 1024;
inline constexpr size_t kLinkReplyQueueBytes = size_t(1) << 20;
// A set-based call's generations that get links back (kvg_answers: up to
// 256 of them) share kLinkReplyQueueBytes, each at least this much, so one
// call's segment stays within a few MB; a link larger than its queue goes in
// several parts.
inline constexpr size_t kMinGroupLinkReplyQueueBytes = size_t(16) << 10;

// One per PGPROC: a backend has at most one call in flight, and one that
// exits leaks nothing (the next backend on its PGPROC reuses the slot). A
// call is one generation, or the generations of a set-based call
// (kvg_answers), which the worker runs as sequences of their own that share
// its passes.
struct Slot {
  worker_protocol::RequestSlot request;  // its state and id (request_slot.hpp)
  dsm_handle segment;  // the call's segment (below)
  int32_t generations;  // how many the segment holds
  pid_t caller;
  TimestampTz queued_at;
  uint64_t claimed_by;  // the worker's start (Shared::starts) that claimed it
};

// What kvg_engine_worker() shows.
struct Figures {
  int32_t sequences;     // running now
  int32_t queued;        // waiting for room (kvg.engine_max_batch, kvg.engine_kv_memory)
  int32_t batch_peak;    // the most sequences one pass has carried
  int64_t kv_bytes;      // reserved by the running sequences
  uint64_t passes;       // forward passes run
  uint64_t rows;         // sequences' parts carried by them
  uint64_t served, failed;
  uint64_t cache_entries, cache_bytes, cache_hits, cache_misses;  // the verified-artifact cache
  uint64_t gpu_weight_uploads;  // models' weights copied to the GPU by the worker (CudaForward::weight_uploads)
  char model[256];       // the last model path loaded
};

// How long a worker may go without a heartbeat before its callers stop
// waiting (57V02): a stopped or frozen process.
inline constexpr uint64_t kStallMs = 10000;

struct Shared {
  LWLock* lock;  // every field but heartbeat_ms
  pid_t pid;     // the worker's; 0 while none runs
  // CLOCK_MONOTONIC, in ms, written about every 250 ms by a thread of the
  // worker's own while its process runs (a long pass included); 0 before
  // its first. Read without the lock.
  pg_atomic_uint64 heartbeat_ms;
  Latch* latch;  // the worker's, set when a request is queued
  uint64_t starts;  // times a worker started: a call claimed by an earlier one knows it is gone
  Figures figures;
  // kvg_engine_worker_reset(): the cumulative figures as they were then
  // (shown less these), when, and a request the worker takes up at its next
  // publication to forget its batch peak. A worker that starts counts from
  // zero again, and clears the baseline.
  Figures reset_base;
  TimestampTz reset_at;
  bool forget_batch_peak;
  int slot_count;
  Slot slots[FLEXIBLE_ARRAY_MEMBER];
};

// The queue a backend answers a Need on (a SupplyNotice).
inline constexpr size_t kSupplyQueueBytes = 256;

// The segment of one call, laid out by shm_toc under these keys, once for
// each of its generations: the request (a framed GenerationRequest,
// protocol/wire.hpp), the reply queue (shm_mq, worker to backend,
// kReplyQueueBytes or a link queue's) and the supply queue (backend to
// worker).
inline constexpr uint64_t kCallMagic = 0x6b764745;  // "kvGE"
enum CallKey : uint64_t { kRequestKey = 1, kReplyQueueKey, kSupplyQueueKey };
// Generation `index`'s chunk under `key` (generation 0's are the keys above).
inline constexpr uint64_t call_key(CallKey key, size_t index) { return key + 3 * uint64_t(index); }

// The segment a Need is answered in: one framed SuppliedArtifacts.
inline constexpr uint64_t kSupplyMagic = 0x6b764753;  // "kvGS"
enum SupplyKey : uint64_t { kSuppliedKey = 1 };

// Attached by shmem_startup_hook in every process; nullptr when kvg was not
// preloaded.
Shared* shared();

// CLOCK_MONOTONIC in ms: the same clock in every process of the machine.
uint64_t monotonic_ms();

}  // namespace kvg::pg::engine_worker
