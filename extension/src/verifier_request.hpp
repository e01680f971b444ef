// What an asking backend and a verifier worker share: one dynamic shared
// memory segment per verification (verifier_worker.hpp). The header below is
// followed by the bytes of spec, pin, question and candidate, in that order.
// The worker writes passed, refusal and then, after a write barrier, state;
// the asker reads state, a read barrier, then the rest.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvg::pg {

struct VerifierRequest {
  // Written by the asker before the worker starts.
  uint32_t database;  // Oid
  int32_t timeout_ms;
  uint32_t spec_len, pin_len, question_len, candidate_len;
  // Written by the worker.
  volatile uint32_t state;  // kPending, then kAnswered
  bool passed;
  char refusal[256];  // why it failed closed ("" when it ran); never the verifier's own words

  static constexpr uint32_t kPending = 0;
  static constexpr uint32_t kAnswered = 1;

  const char* text() const { return reinterpret_cast<const char*>(this + 1); }
  char* text() { return reinterpret_cast<char*>(this + 1); }
};

}  // namespace kvg::pg
