// SQL from C++ through SPI, in the caller's transaction. Parameters travel as
// text ($1..$n, cast in the statement: `$2::bigint`) and results come back as
// text, so the C++ side needs no knowledge of PostgreSQL's type system.
//
// Every statement resolves its functions, operators, types and tables with
// search_path = pg_catalog, pg_temp (kPinnedSearchPath), whatever the
// caller's: an operator in a schema the caller put ahead of pg_catalog must
// not answer for `=` in kvg's access checks (docs/security.md). The one
// exception says so in its name: a name the caller wrote, resolved as the
// caller would (run_in_callers_path).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

struct FunctionCallInfoBaseData;

namespace kvg::pg {

using SqlValue = std::optional<std::string>;  // nullopt is SQL NULL
using SqlRow = std::vector<SqlValue>;

class Spi {
 public:
  Spi();   // SPI_connect
  ~Spi();  // SPI_finish (left to transaction abort once an ERROR is pending)
  Spi(const Spi&) = delete;
  Spi& operator=(const Spi&) = delete;

  // Runs one statement (any kind; it sees this transaction's earlier writes)
  // and returns its rows, every column as text.
  std::vector<SqlRow> run(const char* sql, std::initializer_list<SqlValue> params = {});
  std::vector<SqlRow> run(const char* sql, const std::vector<SqlValue>& params);
  // run(), but under the latest committed state rather than the transaction's
  // snapshot, as PostgreSQL's foreign-key checks do: a REPEATABLE READ
  // transaction then reads and updates a row that others changed since it
  // began. Only for rows the caller has locked against concurrent change,
  // or that never change (kvg.artifacts: lo_store.hpp).
  std::vector<SqlRow> run_latest(const char* sql, std::initializer_list<SqlValue> params = {});
  // run(), under the caller's search_path: only to resolve a name the caller
  // wrote into the object it means (the statement returns it qualified, or
  // its OID, for the pinned statements that follow).
  std::vector<SqlRow> run_in_callers_path(const char* sql, std::initializer_list<SqlValue> params = {});
  // Runs a read-only query under the caller's snapshot and hands its rows,
  // as a cursor fetches them, to the calling set-returning function's result
  // (a tuplestore, which spills to disk past work_mem): however many rows,
  // none is held twice in memory, and none is converted. The query's columns
  // must have the function's result types (checked: an error otherwise). The
  // function then returns Datum(0).
  void return_rows_of(FunctionCallInfoBaseData* fcinfo, const char* sql, std::initializer_list<SqlValue> params);
};

// The search_path of every statement kvg runs: PostgreSQL's catalog, then
// the session's temporary schema last, so that nothing a user creates is
// found for a name kvg did not qualify.
inline constexpr const char* kPinnedSearchPath = "pg_catalog, pg_temp";

// Runs `body` (SPI calls made by hand, such as a saved plan) with
// search_path = kPinnedSearchPath, restored afterwards whatever happens.
void with_pinned_search_path(const std::function<void()>& body);

}  // namespace kvg::pg
