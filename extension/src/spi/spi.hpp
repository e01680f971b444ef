// SQL from C++ through SPI, in the caller's transaction. Parameters travel as
// text ($1..$n, cast in the statement: `$2::bigint`) and results come back as
// text, so the C++ side needs no knowledge of PostgreSQL's type system.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

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
};

}  // namespace kvg::pg
