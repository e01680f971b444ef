#include "extension/src/spi/sql_values.hpp"

#include <memory>

#include "common/error.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "access/detoast.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "access/htup_details.h"
}

namespace kvg::pg {

bool arg_is_null(FunctionCallInfo fcinfo, int n) { return PG_ARGISNULL(n); }

bool arg_is_blank(FunctionCallInfo fcinfo, int n) {
  if (PG_ARGISNULL(n)) return true;
  constexpr size_t kMaxBlankBytes = 1 << 20;  // read no more than this to decide
  if (arg_bytes(fcinfo, n) > kMaxBlankBytes) return false;
  text* value = call([&] { return PG_GETARG_TEXT_PP(n); });
  return is_blank(std::string_view(VARDATA_ANY(value), VARSIZE_ANY_EXHDR(value)));
}

bool is_blank(std::string_view text) { return text.find_first_not_of(" \t\n\r\v\f") == std::string_view::npos; }

void require_arg(FunctionCallInfo fcinfo, int n, const char* name) {
  if (PG_ARGISNULL(n)) throw Error(ErrorCode::InvalidArgument, std::string(name) + " must not be NULL");
}

std::string text_arg(FunctionCallInfo fcinfo, int n) {
  text* value = call([&] { return PG_GETARG_TEXT_PP(n); });
  return std::string(VARDATA_ANY(value), VARSIZE_ANY_EXHDR(value));
}

std::string jsonb_text_arg(FunctionCallInfo fcinfo, int n) {
  const char* json = call([&] { return DatumGetCString(DirectFunctionCall1(jsonb_out, PG_GETARG_DATUM(n))); });
  return std::string(json);
}

size_t arg_bytes(FunctionCallInfo fcinfo, int n) {
  return call([&] { return toast_raw_datum_size(PG_GETARG_DATUM(n)) - VARHDRSZ; });
}

std::span<const uint8_t> bytea_arg(FunctionCallInfo fcinfo, int n) {
  bytea* value = call([&] { return PG_GETARG_BYTEA_PP(n); });
  return {reinterpret_cast<const uint8_t*>(VARDATA_ANY(value)), VARSIZE_ANY_EXHDR(value)};
}

Digest parse_digest(std::string_view hex, const char* what) {
  if (auto digest = digest_from_hex(hex)) return *digest;
  throw Error(ErrorCode::InvalidArgument,
              std::string(what) + " must be 64 hexadecimal characters (a SHA-256), got \"" +
                  std::string(hex.substr(0, 80)) + (hex.size() > 80 ? "...\"" : "\""));
}

Digest digest_arg(FunctionCallInfo fcinfo, int n, const char* what) { return parse_digest(text_arg(fcinfo, n), what); }

Datum text_result(std::string_view text) {
  return call([&] {
    MemoryContext old = MemoryContextSwitchTo(entry_context());
    Datum d = PointerGetDatum(cstring_to_text_with_len(text.data(), static_cast<int>(text.size())));
    MemoryContextSwitchTo(old);
    return d;
  });
}

Datum bytea_result(size_t n, uint8_t** data) {
  if (n > MaxAllocSize - VARHDRSZ)
    throw Error(ErrorCode::OutOfRange, std::to_string(n) + " bytes do not fit in a bytea (at most 1 GB)");
  bytea* value = call([&] { return static_cast<bytea*>(MemoryContextAlloc(entry_context(), n + VARHDRSZ)); });
  SET_VARSIZE(value, n + VARHDRSZ);
  *data = reinterpret_cast<uint8_t*>(VARDATA(value));
  return PointerGetDatum(value);
}

Datum jsonb_result(const std::string& json) {
  return call([&] {
    MemoryContext old = MemoryContextSwitchTo(entry_context());
    Datum d = DirectFunctionCall1(jsonb_in, CStringGetDatum(json.c_str()));
    MemoryContextSwitchTo(old);
    return d;
  });
}

void return_single_row(FunctionCallInfo fcinfo, std::vector<Datum> values) {
  std::vector<ResultValue> row(values.begin(), values.end());
  return_rows(fcinfo, {row});
}

void return_rows(FunctionCallInfo fcinfo, const std::vector<std::vector<ResultValue>>& rows) {
  call([&] { InitMaterializedSRF(fcinfo, 0); });
  auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  for (const auto& row : rows) {
    std::vector<Datum> values(row.size(), Datum(0));
    auto nulls = std::make_unique<bool[]>(row.size());
    for (size_t i = 0; i < row.size(); ++i) {
      nulls[i] = !row[i].has_value();
      if (row[i]) values[i] = *row[i];
    }
    call([&] {
      if (rsinfo->setDesc->natts != static_cast<int>(values.size()))
        elog(ERROR, "kvg: result has %d columns, the function returns %zu", rsinfo->setDesc->natts, values.size());
      tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values.data(), nulls.get());
    });
  }
}

Datum composite_result(FunctionCallInfo fcinfo, const std::vector<ResultValue>& values) {
  std::vector<Datum> datums(values.size(), Datum(0));
  auto nulls = std::make_unique<bool[]>(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    nulls[i] = !values[i].has_value();
    if (values[i]) datums[i] = *values[i];
  }
  return call([&] {
    TupleDesc desc = nullptr;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE || desc->natts != int(datums.size()))
      elog(ERROR, "kvg: the function's declared result does not have %zu columns", datums.size());
    MemoryContext old = MemoryContextSwitchTo(entry_context());
    desc = BlessTupleDesc(desc);
    const Datum d = HeapTupleGetDatum(heap_form_tuple(desc, datums.data(), nulls.get()));
    MemoryContextSwitchTo(old);
    return d;
  });
}

std::vector<std::optional<std::string>> text_array_arg(FunctionCallInfoBaseData* fcinfo, int n, size_t max_items,
                                                       const char* name) {
  ArrayType* a = call([&] { return DatumGetArrayTypeP(PG_GETARG_DATUM(n)); });
  if (ARR_NDIM(a) > 1) throw Error(ErrorCode::InvalidArgument, std::string(name) + " must be a one-dimensional array");
  const int count = call([&] { return ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a)); });
  if (size_t(count) > max_items)
    throw Error(ErrorCode::OutOfRange, std::string(name) + " holds " + std::to_string(count) + " elements, more than " +
                                           std::to_string(max_items));
  Datum* elems = nullptr;
  bool* nulls = nullptr;
  int got = 0;
  call([&] { deconstruct_array(a, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &got); });
  std::vector<std::optional<std::string>> items;
  items.reserve(size_t(got));
  for (int i = 0; i < got; ++i) {
    if (nulls[i]) {
      items.emplace_back();
      continue;
    }
    const char* data = nullptr;
    size_t size = 0;
    call([&] {
      text* t = DatumGetTextPP(elems[i]);
      data = VARDATA_ANY(t);
      size = VARSIZE_ANY_EXHDR(t);
    });
    items.emplace_back(std::string(data, size));
  }
  return items;
}

void notice(const std::string& message, const std::string& detail) {
  call([&] {
    ereport(NOTICE, (errmsg_internal("%s", message.c_str()), detail.empty() ? 0 : errdetail_internal("%s", detail.c_str())));
  });
}

void warning(const std::string& message, const std::string& hint, const std::string& detail) {
  call([&] {
    ereport(WARNING, (errmsg_internal("%s", message.c_str()), hint.empty() ? 0 : errhint("%s", hint.c_str()),
                      detail.empty() ? 0 : errdetail_internal("%s", detail.c_str())));
  });
}

Datum int4_array_result(const std::vector<int32_t>& values) {
  // Built before calling into PostgreSQL: an error there must not skip a destructor.
  std::vector<Datum> items;
  items.reserve(values.size());
  for (const int32_t v : values) items.push_back(Int32GetDatum(v));
  return call([&] { return PointerGetDatum(construct_array_builtin(items.data(), int(items.size()), INT4OID)); });
}

}  // namespace kvg::pg
