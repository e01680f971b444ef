// What a backend and kvg's writer (workers/writer/writer.hpp) say to each
// other: a WriterRequest in the request's segment (which registered
// statement to run, and its parameters), and a WriterReply in the request's
// slot of kvg's shared memory (the statement's result, or why it was not
// committed). Each message's fields are listed once, in fields(); wire.hpp
// encodes and decodes them.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "extension/src/workers/protocol/sqlstate.hpp"
#include "extension/src/workers/protocol/wire.hpp"

namespace kvg::worker_protocol {

// Views: the writer reads the values where the caller put them (an
// artifact's bytes are not copied again before they become a parameter).
struct WriterRequest {
  uint32_t statement = 0;                               // a kind registered with the writer
  std::vector<std::optional<std::string_view>> values;  // its parameters' bytes; nullopt: NULL
  template <class F> void fields(F& f) { f(statement), f(values); }
};

// Written by the writer into a fixed buffer of the caller's slot, under the
// slot table's lock: so its size is bounded (kFramedBytes) by cutting the
// error message, and nothing is allocated to write it.
struct WriterReply {
  static constexpr size_t kMaxErrorBytes = 255;
  int64_t result = 0;         // the statement's one value, when committed
  std::string_view sqlstate;  // of the error that failed it; "" when the writer stopped first
  std::string_view error;     // why it was not committed; "" when it was
  template <class F> void fields(F& f) { f(result), f(sqlstate), f(error); }
  void validate() const {
    if (!sqlstate.empty() && !is_sqlstate(sqlstate)) throw ProtocolError("names a SQLSTATE that is none");
    if (error.size() > kMaxErrorBytes) throw ProtocolError("carries an error message longer than any sent");
  }
  // A reply whose error is cut to what the buffer holds (byte-wise, as the
  // server log's copy is not).
  static WriterReply failed(std::string_view sqlstate, std::string_view error) {
    return {0, is_sqlstate(sqlstate) ? sqlstate : std::string_view(), error.substr(0, kMaxErrorBytes)};
  }
  // The most a framed reply takes: frame, result, two lengths, the texts.
  static constexpr size_t kFramedBytes = 8 + 8 + (8 + 5) + (8 + kMaxErrorBytes);
};

}  // namespace kvg::worker_protocol
