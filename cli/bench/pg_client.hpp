// A PostgreSQL client connection for the commands that measure the server
// (kvg bench-store). libpq only: a client library, no server headers, so
// cli/ stays on the client side of the wire.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kvg::cli {

// A statement parameter: text, or raw bytes sent in binary (a bytea without
// escaping, so a gigabyte costs one copy).
struct PgParam {
  std::string value;
  bool binary = false;
};

class PgConnection {
 public:
  // `conninfo` as libpq takes it ("" = the PG* environment); `dbname`, when
  // given, overrides the database it names.
  explicit PgConnection(const std::string& conninfo, const std::optional<std::string>& dbname = std::nullopt);
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // Runs one statement; returns its rows, every value as text ("" for NULL).
  // Throws kvg::Error(Io) with the server's message when it fails.
  std::vector<std::vector<std::string>> exec(const std::string& sql, const std::vector<PgParam>& params = {});
  // The first column of the first row.
  std::string value(const std::string& sql, const std::vector<PgParam>& params = {});

 private:
  struct Conn;
  std::unique_ptr<Conn> conn_;
};

}  // namespace kvg::cli
