#include "cli/bench/pg_client.hpp"

#include <libpq-fe.h>

#include "common/error.hpp"

namespace kvg::cli {

struct PgConnection::Conn {
  PGconn* pg = nullptr;
  ~Conn() {
    if (pg) PQfinish(pg);
  }
};

PgConnection::PgConnection(const std::string& conninfo, const std::optional<std::string>& dbname)
    : conn_(std::make_unique<Conn>()) {
  // expand_dbname: the first "dbname" is parsed as a whole conninfo string,
  // and later keywords (the second "dbname") override what it says.
  const char* keys[] = {"dbname", dbname ? "dbname" : nullptr, nullptr};
  const char* values[] = {conninfo.c_str(), dbname ? dbname->c_str() : nullptr, nullptr};
  conn_->pg = PQconnectdbParams(keys, values, 1);
  if (!conn_->pg || PQstatus(conn_->pg) != CONNECTION_OK)
    throw Error(ErrorCode::Io, std::string("cannot connect to PostgreSQL: ") +
                                   (conn_->pg ? PQerrorMessage(conn_->pg) : "out of memory"));
}

PgConnection::~PgConnection() = default;

std::vector<std::vector<std::string>> PgConnection::exec(const std::string& sql, const std::vector<PgParam>& params) {
  std::vector<const char*> values;
  std::vector<int> lengths, formats;
  for (const PgParam& p : params) {
    values.push_back(p.value.data());
    lengths.push_back(int(p.value.size()));
    formats.push_back(p.binary ? 1 : 0);
  }
  PGresult* r = PQexecParams(conn_->pg, sql.c_str(), int(params.size()), nullptr, values.data(), lengths.data(),
                             formats.data(), 0);
  const std::unique_ptr<PGresult, void (*)(PGresult*)> owned(r, PQclear);
  const ExecStatusType status = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK)
    throw Error(ErrorCode::Io, "PostgreSQL: " + std::string(PQerrorMessage(conn_->pg)) + "(in: " + sql + ")");
  std::vector<std::vector<std::string>> rows(size_t(PQntuples(r)));
  for (int i = 0; i < PQntuples(r); ++i)
    for (int j = 0; j < PQnfields(r); ++j) rows[size_t(i)].emplace_back(PQgetvalue(r, i, j));
  return rows;
}

std::string PgConnection::value(const std::string& sql, const std::vector<PgParam>& params) {
  const auto rows = exec(sql, params);
  if (rows.empty() || rows[0].empty()) throw Error(ErrorCode::Internal, "no value from: " + sql);
  return rows[0][0];
}

}  // namespace kvg::cli
