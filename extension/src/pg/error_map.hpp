// How a kvg::Error reaches a SQL client: which SQLSTATE, and a hint that says
// what to do about it. docs/sql-errors.md is the user-facing copy of this table.
#pragma once

#include "common/error.hpp"

namespace kvg::pg {

struct SqlError {
  int sqlstate;      // PostgreSQL's packed form (MAKE_SQLSTATE)
  const char* hint;  // nullptr when the message already says everything
};

SqlError sql_error_for(ErrorCode code) noexcept;

}  // namespace kvg::pg
