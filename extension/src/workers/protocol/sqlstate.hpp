// What a SQLSTATE looks like (five digits or upper-case letters), checked
// wherever a worker's message carries one that a backend will raise: a
// garbled one is refused as a protocol error, not raised.
#pragma once

#include <string_view>

namespace kvg::worker_protocol {

constexpr bool is_sqlstate(std::string_view code) {
  if (code.size() != 5) return false;
  for (const char c : code)
    if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z'))) return false;
  return true;
}

}  // namespace kvg::worker_protocol
