// What an asking backend and a verifier worker share: one dynamic shared
// memory segment per verification (verifier_worker.hpp), laid out by shm_toc
// under the keys below: the request (a framed VerifierRequest,
// protocol/verifier_messages.hpp) and the answer, which the worker writes
// once: the framed VerifierOutcome, then, after a write barrier, `state`;
// the asker reads `state`, a read barrier, then the outcome.
//
// No request slot (protocol/request_slot.hpp): each verification is a
// background worker of its own, started with this segment's handle as its
// argument, so there is no queue to claim from, no worker that outlives a
// request, and no id to tell requests apart; the segment is the request.
// Only verifier_worker.cpp and verifier_worker_main.cpp include this, after
// postgres.hpp.
#pragma once

#include <cstdint>

#include "extension/src/workers/protocol/verifier_messages.hpp"

namespace kvg::pg::verifier_worker {

inline constexpr uint64_t kVerifierMagic = 0x6b765646;  // "kvVF"
enum VerifierKey : uint64_t { kRequestKey = 1, kAnswerKey };

struct Answer {
  static constexpr uint32_t kPending = 0;  // zeroed: pending
  static constexpr uint32_t kAnswered = 1;
  volatile uint32_t state;
  char outcome[worker_protocol::VerifierOutcome::kFramedBytes];
};

}  // namespace kvg::pg::verifier_worker
