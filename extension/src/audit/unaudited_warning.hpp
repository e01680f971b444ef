// What a call says when kvg.allow_unaudited let its result go without an
// audit row, on a primary (audit.cpp) or a standby (audit_forward.cpp).
#pragma once

#include <string>

namespace kvg::pg {

// A WARNING (01V01) naming the operation and why its row was not recorded.
void warn_unaudited(const std::string& operation, const std::string& why);

}  // namespace kvg::pg
