// What an asking backend and a verifier worker (workers/verifier/
// verifier_worker.hpp) say to each other, both in the verification's one
// segment: the VerifierRequest, and the worker's VerifierOutcome in a
// buffer of bounded size beside it. Each message's fields are listed once,
// in fields(); wire.hpp encodes and decodes them.
#pragma once

#include <cstdint>
#include <string_view>

#include "extension/src/workers/protocol/wire.hpp"

namespace kvg::worker_protocol {

// Views: the worker reads them where the asker put them.
struct VerifierRequest {
  uint32_t database = 0;  // the asker's (an Oid): the worker connects to it
  int32_t timeout_ms = 0;  // kvg.verifier_timeout: the worker's whole transaction at most
  // Freeze `spec` (a depositor's function: copy it into kvg_frozen, commit)
  // rather than run it.
  bool freeze = false;
  std::string_view spec;       // "schema"."name" of a function (text, text) returning boolean
  std::string_view pin;        // to run: kvg.function_pin of the frozen copy, as deposited
  std::string_view question, candidate;
  template <class F> void fields(F& f) {
    f(database), f(timeout_ms), f(freeze), f(spec), f(pin), f(question), f(candidate);
  }
  void validate() const {
    if (timeout_ms < 0) throw ProtocolError("asks for a negative timeout");
  }
};

// The verdict, or why there is none (never the verifier's own words); for
// a freeze, the copy's qualified name and pin instead of a verdict.
struct VerifierOutcome {
  static constexpr size_t kMaxRefusalBytes = 255;
  static constexpr size_t kMaxFrozenBytes = 63;  // kvg_frozen.v_<40 hex>
  static constexpr size_t kPinBytes = 64;        // hex SHA-256
  bool passed = false;
  std::string_view refusal;  // "" when the verifier ran (or was frozen)
  std::string_view frozen, pin;  // a freeze's copy; "" otherwise
  template <class F> void fields(F& f) { f(passed), f(refusal), f(frozen), f(pin); }
  void validate() const {
    if (refusal.size() > kMaxRefusalBytes) throw ProtocolError("carries a refusal longer than any sent");
    if (passed && !refusal.empty()) throw ProtocolError("both passes and refuses");
    if (frozen.size() > kMaxFrozenBytes) throw ProtocolError("names a frozen copy longer than any made");
    if (!pin.empty() && pin.size() != kPinBytes) throw ProtocolError("carries a pin that is no SHA-256");
  }
  static constexpr size_t kFramedBytes = 8 + 1 + (8 + kMaxRefusalBytes) + (8 + kMaxFrozenBytes) + (8 + kPinBytes);
};

}  // namespace kvg::worker_protocol
