#include "extension/src/spi.hpp"

#include "common/error.hpp"
#include "extension/src/pg_boundary.hpp"
#include "extension/src/postgres.hpp"

namespace kvg::pg {

Spi::Spi() {
  call([] {
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "kvg: SPI_connect failed");
  });
}

Spi::~Spi() {
  cleanup([] { SPI_finish(); });
}

std::vector<SqlRow> Spi::run(const char* sql, std::initializer_list<SqlValue> params) {
  const int n = static_cast<int>(params.size());
  std::vector<Oid> types(n, TEXTOID);
  std::vector<Datum> values(n, Datum(0));
  std::vector<char> nulls(n, 'n');
  int i = 0;
  for (const SqlValue& p : params) {
    if (p) {
      values[i] = call([&] { return PointerGetDatum(cstring_to_text_with_len(p->data(), static_cast<int>(p->size()))); });
      nulls[i] = ' ';
    }
    ++i;
  }
  // read_only = false: a fresh snapshot and command counter per statement,
  // so each statement sees what the previous ones (and the LO writes) did.
  const int rc = call([&] { return SPI_execute_with_args(sql, n, types.data(), values.data(), nulls.data(), false, 0); });
  if (rc < 0) throw Error(ErrorCode::Internal, std::string("SPI failed (") + SPI_result_code_string(rc) + "): " + sql);

  std::vector<SqlRow> rows;
  SPITupleTable* table = SPI_tuptable;
  if (!table) return rows;
  const int ncols = table->tupdesc->natts;
  rows.reserve(SPI_processed);
  for (uint64 r = 0; r < SPI_processed; ++r) {
    SqlRow& row = rows.emplace_back();
    for (int c = 1; c <= ncols; ++c) {
      const char* text = call([&] { return SPI_getvalue(table->vals[r], table->tupdesc, c); });
      row.push_back(text ? SqlValue(text) : std::nullopt);
    }
  }
  return rows;
}

}  // namespace kvg::pg
