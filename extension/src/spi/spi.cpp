#include "extension/src/spi/spi.hpp"

#include "common/error.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/spi/kept_plans.hpp"
#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"
}

namespace kvg::pg {

Spi::Spi() {
  call([] {
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "kvg: SPI_connect failed");
  });
}

Spi::~Spi() {
  cleanup([] { SPI_finish(); });
}

namespace {

// Parameters as text datums (SQL casts them: `$2::bigint`).
struct Params {
  std::vector<Oid> types;
  std::vector<Datum> values;
  std::vector<char> nulls;

  template <typename List>
  explicit Params(const List& params)
      : types(params.size(), TEXTOID), values(params.size(), Datum(0)), nulls(params.size(), 'n') {
    size_t i = 0;
    for (const SqlValue& p : params) {
      if (p) {
        values[i] = call([&] { return PointerGetDatum(cstring_to_text_with_len(p->data(), static_cast<int>(p->size()))); });
        nulls[i] = ' ';
      }
      ++i;
    }
  }
  int count() const { return static_cast<int>(types.size()); }
};

std::vector<SqlRow> result_rows(int rc, const char* sql) {
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

// read_only = false: a fresh snapshot and command counter per statement, so
// each statement sees what the previous ones (and the LO writes) did. The
// plan is the process's kept one (kept_plans.hpp), prepared under the
// pinned search_path the statement runs under.
int execute(const char* sql, Params& p) {
  _SPI_plan* plan = plan_of(sql, p.count(), p.types.data());
  return call([&] { return SPI_execute_plan(plan, p.values.data(), p.nulls.data(), false, 0); });
}

// execute(), planned for this run only: a statement under the caller's
// search_path resolves as the caller's path resolves now, objects made since
// an earlier call included, which a kept plan would not re-resolve (the plan
// cache replans for another path, not for a new object ahead on the same one).
int execute_once(const char* sql, Params& p) {
  return call([&] {
    return SPI_execute_with_args(sql, p.count(), p.types.data(), p.values.data(), p.nulls.data(), false, 0);
  });
}

}  // namespace

void with_pinned_search_path(const std::function<void()>& body) {
  // As PostgreSQL runs a function that has SET search_path: a GUC nest level
  // of its own, popped afterwards. After an ERROR the transaction's abort
  // pops it too; popping it here first is what keeps a caught error from
  // leaving the pinned path in place for the rest of the caller's statement.
  const int level = call([] {
    const int nest = NewGUCNestLevel();
    (void)set_config_option("search_path", kPinnedSearchPath, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
                            false);
    return nest;
  });
  try {
    body();
  } catch (...) {
    cleanup([level] { AtEOXact_GUC(false, level); });
    throw;
  }
  call([level] { AtEOXact_GUC(true, level); });
}

std::vector<SqlRow> Spi::run(const char* sql, std::initializer_list<SqlValue> params) {
  return run(sql, std::vector<SqlValue>(params));
}

std::vector<SqlRow> Spi::run(const char* sql, const std::vector<SqlValue>& params) {
  Params p(params);
  int rc = 0;
  with_pinned_search_path([&] { rc = execute(sql, p); });
  return result_rows(rc, sql);
}

std::vector<SqlRow> Spi::run_in_callers_path(const char* sql, std::initializer_list<SqlValue> params) {
  Params p(params);
  return result_rows(execute_once(sql, p), sql);
}

std::vector<SqlRow> Spi::run_latest(const char* sql, std::initializer_list<SqlValue> params) {
  Params p(params);
  int rc = 0;
  with_pinned_search_path([&] {
    _SPI_plan* plan = plan_of(sql, p.count(), p.types.data());
    rc = call([&] {
      CommandCounterIncrement();  // our own earlier writes belong to the latest state
      return SPI_execute_snapshot(plan, p.values.data(), p.nulls.data(), GetLatestSnapshot(), InvalidSnapshot,
                                  false, true, 0);
    });
  });
  return result_rows(rc, sql);
}

void Spi::return_rows_of(FunctionCallInfo fcinfo, const char* sql, std::initializer_list<SqlValue> params) {
  constexpr long kRowsPerFetch = 1000;
  Params p(params);
  call([&] { InitMaterializedSRF(fcinfo, 0); });
  auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  with_pinned_search_path([&] {
    call([&] {
      Portal portal = SPI_cursor_open_with_args(nullptr, sql, p.count(), p.types.data(), p.values.data(),
                                                p.nulls.data(), true, 0);
      if (!portal) elog(ERROR, "kvg: cannot open a cursor for: %s", sql);
      for (;;) {
        SPI_cursor_fetch(portal, true, kRowsPerFetch);
        if (SPI_processed == 0) break;
        const TupleDesc got = SPI_tuptable->tupdesc;
        bool same = got->natts == rsinfo->setDesc->natts;
        for (int i = 0; same && i < got->natts; ++i)
          same = TupleDescAttr(got, i)->atttypid == TupleDescAttr(rsinfo->setDesc, i)->atttypid;
        if (!same) elog(ERROR, "kvg: the query's rows are not the function's result type: %s", sql);
        for (uint64 i = 0; i < SPI_processed; ++i) tuplestore_puttuple(rsinfo->setResult, SPI_tuptable->vals[i]);
        SPI_freetuptable(SPI_tuptable);
        CHECK_FOR_INTERRUPTS();
      }
      SPI_cursor_close(portal);
    });
  });
}

}  // namespace kvg::pg
