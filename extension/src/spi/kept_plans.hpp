// Plans of kvg's own statements, prepared once per process and kept (the
// plan cache's SPI_keepplan), instead of parsed, analysed and planned again
// at every call: for a short call those steps cost more than running the
// statements (docs/engine-worker.md, "Where a short call's time goes").
//
// PostgreSQL's plan cache revalidates a kept plan before each run, as it
// does a prepared statement's: a table, function or operator it resolved was
// altered, dropped or replaced; a different search_path; a different role
// where row security applied. So a kept plan resolves what the statement
// would resolve prepared afresh; kvg's callers run it under the pinned
// search_path (spi.hpp), as they prepared it, where nothing a user creates
// can come ahead of what it resolved. A statement under the caller's own
// search_path (Spi::run_in_callers_path) is not kept: there a new object
// ahead on the same path would not be seen.
//
// Keyed by the statement's text and its parameters' types. Bounded: past
// kMaxKeptPlans statements (texts built at run time could be any number)
// a statement is prepared for the one run, in SPI's memory, which
// SPI_finish frees, as an unkept statement always was.
#pragma once

#include <cstddef>

struct _SPI_plan;  // executor/spi.h: typedef struct _SPI_plan *SPIPlanPtr

namespace kvg::pg {

inline constexpr size_t kMaxKeptPlans = 64;

// The plan of `sql` with parameters of these types (PostgreSQL Oids), kept
// or prepared now. Needs SPI connected; raises (PgError) what preparing it
// raises, and keeps nothing then.
_SPI_plan* plan_of(const char* sql, int n_params, const unsigned int* types);

// How many plans this process keeps (for tests).
size_t kept_plan_count();

}  // namespace kvg::pg
