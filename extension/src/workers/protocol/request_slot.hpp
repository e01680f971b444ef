// The state of one request slot, shared by the engine worker's and the
// writer's slot tables (one slot per PGPROC in kvg's shared memory: a
// process has at most one request in flight, and one that exits leaks
// nothing, since the next process on its PGPROC reuses the slot).
//
// Plain data and plain code: every call below runs under the lock of the
// table the slot is in (an LWLock the caller holds), never allocates, never
// throws, so the writer's C-style process and an exit hook may use it.
//
//   Free --queue--> Queued --claim--> Claimed --answer--> Done | Failed --collect--> Free
//   Queued --abandon--> Free              Claimed --abandon--> Abandoned --answer/release--> Free
//   Claimed --release--> Free (the engine worker streams its answer and frees the slot itself)
//   Queued | Claimed --fail_unanswered--> Failed (its worker stops)
//
// `request` tells successive requests in a slot apart: a caller's and a
// worker's calls name the request they mean, and do nothing to a slot that
// holds another one (a later request of the next process on that PGPROC,
// after the first exited without a word, FATAL say).
//
// The verifier has no slot: each verification is a background worker of
// its own, started with its segment's handle, so there is no queue to claim
// from and no worker to share (verifier_messages.hpp).
#pragma once

#include <cstdint>
#include <optional>

namespace kvg::worker_protocol {

enum class SlotState : uint32_t {
  Free,       // zeroed shared memory is Free
  Queued,     // a request waits in its segment
  Claimed,    // a worker runs it
  Done,       // committed: the answer is in the slot
  Failed,     // not done: the answer says why
  Abandoned,  // its caller stopped waiting while a worker ran it
};

const char* slot_state_name(SlotState state);

struct RequestSlot {
  SlotState state;
  uint64_t request;

  // The caller: a new request, whatever an earlier process on this PGPROC
  // left here. False (nothing changes) for the id the slot holds already:
  // a worker would take the new request for the old one.
  bool queue(uint64_t id);
  // The worker: takes a queued request; its id, or nothing.
  std::optional<uint64_t> claim();
  // The worker, done with request `id`: Done (ok) or Failed. True when its
  // caller waits for the answer (wake it); false when the caller abandoned
  // it (the slot is Free again) or the slot holds another request.
  bool answer(uint64_t id, bool ok);
  // The engine worker, done with request `id` whose answer went by queue:
  // Claimed or Abandoned become Free. False when the slot holds another.
  bool release(uint64_t id);
  // The worker: whether its caller still waits for request `id`.
  bool holds(uint64_t id) const { return state == SlotState::Claimed && request == id; }
  // The caller: request `id`'s final state (Done or Failed), freeing the
  // slot; nothing while it is not answered.
  std::optional<SlotState> collect(uint64_t id);
  // The caller stops waiting (an error, cancel, exit): Queued becomes Free
  // (no worker saw it), Claimed Abandoned (its worker frees it), an
  // uncollected answer Free. False when the slot holds another request.
  bool abandon(uint64_t id);
  // A worker that stops with requests unanswered: Queued or Claimed become
  // Failed (true: wake the caller), Abandoned Free.
  bool fail_unanswered();
  // A worker that starts: a claim of an earlier worker is void (its callers
  // see that worker gone), the slot Free again. True when there was one.
  bool forget_claim();
};

// Ids that tell one process's requests from each other and from every
// other process's: the pid above, a count below. A pid is never 0, so no
// id is a zeroed slot's.
class RequestIds {
 public:
  uint64_t next(int32_t pid) { return (uint64_t(uint32_t(pid)) << 32) | ++count_; }

 private:
  uint32_t count_ = 0;
};

}  // namespace kvg::worker_protocol
