// The one exception type every layer throws. Its code lets the PostgreSQL
// boundary choose a SQLSTATE and the CLI an exit status without parsing text.
#pragma once

#include <stdexcept>
#include <string>

namespace kvg {

enum class ErrorCode {
  InvalidArgument,  // caller passed something unusable (bad flag, empty prompt)
  Io,               // the operating system refused a read/write/mmap
  Corrupt,          // bytes do not parse or do not hash to what they claim
  Unsupported,      // well-formed, but a feature we do not implement
  ModelMismatch,    // artifact/model fingerprints or layouts differ
  RecipeMismatch,   // artifact was produced under another arithmetic recipe
  TokenMismatch,    // prompt does not begin with the artifact's tokens
  NotFound,         // hash or file absent from a store
  OutOfRange,       // exceeds context length, limits, sizes
  Cancelled,        // the host asked us to stop (query cancel, timeout)
  Internal,         // a bug: an invariant did not hold
};

const char* error_code_name(ErrorCode code) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

inline const char* error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::InvalidArgument: return "invalid argument";
    case ErrorCode::Io: return "i/o error";
    case ErrorCode::Corrupt: return "corrupt data";
    case ErrorCode::Unsupported: return "unsupported";
    case ErrorCode::ModelMismatch: return "model mismatch";
    case ErrorCode::RecipeMismatch: return "recipe mismatch";
    case ErrorCode::TokenMismatch: return "token mismatch";
    case ErrorCode::NotFound: return "not found";
    case ErrorCode::OutOfRange: return "out of range";
    case ErrorCode::Cancelled: return "cancelled";
    case ErrorCode::Internal: return "internal error";
  }
  return "error";
}

}  // namespace kvg
