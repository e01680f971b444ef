// A check hook for a string setting whose value C++ code validates (a
// template that must parse, a connection string libpq must read), so that a
// bad value fails at SET rather than at the next call that uses it.
#pragma once

#include <optional>
#include <string>

namespace kvg::pg {

// Why `value` is refused; nullopt when it is accepted. May throw: the hook
// turns an exception into a refusal.
using SettingProblem = std::optional<std::string> (*)(const char* value);

// The body of a GUC string check hook: true when `problem(*newval)` finds
// nothing. A check hook is called from C, so nothing is thrown out of it,
// and PostgreSQL is called (GUC_check_errdetail may palloc, so longjmp) only
// once every C++ object and exception is gone.
bool check_string_setting(char** newval, SettingProblem problem);

}  // namespace kvg::pg
