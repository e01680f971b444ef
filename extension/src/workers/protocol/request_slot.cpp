// The request slot's transitions (request_slot.hpp).
#include "extension/src/workers/protocol/request_slot.hpp"

namespace kvg::worker_protocol {

const char* slot_state_name(SlotState state) {
  switch (state) {
    case SlotState::Free: return "free";
    case SlotState::Queued: return "queued";
    case SlotState::Claimed: return "claimed";
    case SlotState::Done: return "done";
    case SlotState::Failed: return "failed";
    case SlotState::Abandoned: return "abandoned";
  }
  return "unknown";
}

bool RequestSlot::queue(uint64_t id) {
  if (id == request) return false;
  state = SlotState::Queued;
  request = id;
  return true;
}

std::optional<uint64_t> RequestSlot::claim() {
  if (state != SlotState::Queued) return std::nullopt;
  state = SlotState::Claimed;
  return request;
}

bool RequestSlot::answer(uint64_t id, bool ok) {
  if (request != id) return false;
  if (state == SlotState::Abandoned) {
    state = SlotState::Free;
    return false;
  }
  if (state != SlotState::Claimed) return false;
  state = ok ? SlotState::Done : SlotState::Failed;
  return true;
}

bool RequestSlot::release(uint64_t id) {
  if (request != id || (state != SlotState::Claimed && state != SlotState::Abandoned)) return false;
  state = SlotState::Free;
  return true;
}

std::optional<SlotState> RequestSlot::collect(uint64_t id) {
  if (request != id || (state != SlotState::Done && state != SlotState::Failed)) return std::nullopt;
  const SlotState answered = state;
  state = SlotState::Free;
  return answered;
}

bool RequestSlot::abandon(uint64_t id) {
  if (request != id) return false;
  switch (state) {
    case SlotState::Queued:
    case SlotState::Done:
    case SlotState::Failed:
      state = SlotState::Free;
      return true;
    case SlotState::Claimed:
      state = SlotState::Abandoned;
      return true;
    case SlotState::Free:
    case SlotState::Abandoned:
      return false;
  }
  return false;
}

bool RequestSlot::fail_unanswered() {
  if (state == SlotState::Abandoned) state = SlotState::Free;
  if (state != SlotState::Queued && state != SlotState::Claimed) return false;
  state = SlotState::Failed;
  return true;
}

bool RequestSlot::forget_claim() {
  if (state != SlotState::Claimed && state != SlotState::Abandoned) return false;
  state = SlotState::Free;
  return true;
}

}  // namespace kvg::worker_protocol
