// Internal: one header parser shared by parse_header (memory) and
// ArtifactReader (stream), so both apply exactly the same rules in the same order.
#pragma once

#include <cstddef>
#include <cstdint>

#include "storage/artifact_format.hpp"

namespace kvg::detail {

// The first bytes of an artifact, fetched on demand.
class HeaderBytes {
 public:
  virtual ~HeaderBytes() = default;
  // Pointer to the first n bytes (valid until the next call); throws Corrupt
  // "artifact truncated" if fewer exist.
  virtual const uint8_t* need(size_t n) = 0;
  // Called as soon as the header fixes the total artifact size, so a later
  // truncation can be reported against it.
  virtual void expect_total(uint64_t /*total_bytes*/) {}
};

ArtifactHeader parse_header_from(HeaderBytes& in);

[[noreturn]] void throw_truncated(uint64_t expected, uint64_t got);

}  // namespace kvg::detail
