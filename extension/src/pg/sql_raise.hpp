// PostgreSQL ERRORs with a SQLSTATE that kvg::ErrorCode does not name — a
// refused deposit (22V04), a question already learned otherwise (23505), an
// unknown verifier function (42883) — raised inside pg::call, so they reach
// the client exactly as the server's own errors do (pg_boundary.hpp).
#pragma once

#include <string>

namespace kvg::pg {

// `sqlstate`: five characters, e.g. "23505".
[[noreturn]] void raise_sqlstate(const char* sqlstate, const std::string& message, const std::string& hint = {},
                                 const std::string& detail = {});

}  // namespace kvg::pg
