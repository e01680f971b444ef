// Arguments and results of SQL entry points as C++ values. Every conversion
// that touches PostgreSQL (detoasting, palloc) goes through pg::call.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "storage/sha256.hpp"

struct FunctionCallInfoBaseData;
typedef uintptr_t Datum;

namespace kvg::pg {

bool arg_is_null(FunctionCallInfoBaseData* fcinfo, int n);
// NULL, or a text argument that is empty or only whitespace: what the SQL
// API answers with NULL, or no row, instead of an error (docs/sql.md). A
// text of more than 1 MB is never blank (every prompt bound refuses it).
bool arg_is_blank(FunctionCallInfoBaseData* fcinfo, int n);
// Empty or only ASCII whitespace: the blankness arg_is_blank tests.
bool is_blank(std::string_view text);
// For functions that are not STRICT (they have optional arguments): throws
// InvalidArgument naming `name` when a required argument is NULL.
void require_arg(FunctionCallInfoBaseData* fcinfo, int n, const char* name);
std::string text_arg(FunctionCallInfoBaseData* fcinfo, int n);
// A one-dimensional text[] argument's elements (nullopt for a NULL one);
// more than max_items is refused (54000) before an element is read, more
// dimensions InvalidArgument, both naming `name`.
std::vector<std::optional<std::string>> text_array_arg(FunctionCallInfoBaseData* fcinfo, int n, size_t max_items,
                                                       const char* name);
// A jsonb argument as its canonical JSON text (jsonb_out).
std::string jsonb_text_arg(FunctionCallInfoBaseData* fcinfo, int n);
// The argument's size in bytes, read from its header without detoasting it,
// so that an oversized value is refused before it is copied anywhere.
size_t arg_bytes(FunctionCallInfoBaseData* fcinfo, int n);
// The detoasted bytes; valid until the function returns.
std::span<const uint8_t> bytea_arg(FunctionCallInfoBaseData* fcinfo, int n);
// An artifact identity: 64 hex characters (either case); InvalidArgument otherwise,
// naming `what`.
Digest digest_arg(FunctionCallInfoBaseData* fcinfo, int n, const char* what);
Digest parse_digest(std::string_view hex, const char* what);

// Results, allocated in the entry's memory context.
Datum text_result(std::string_view text);
// A bytea of n bytes whose contents the caller fills through *data.
Datum bytea_result(size_t n, uint8_t** data);
Datum jsonb_result(const std::string& json);
// token ids as an integer[] result.
Datum int4_array_result(const std::vector<int32_t>& values);
// The one row of a set-returning function declared RETURNS TABLE (no NULLs);
// the function then returns Datum(0).
void return_single_row(FunctionCallInfoBaseData* fcinfo, std::vector<Datum> values);

// A column value of a result row: nullopt is SQL NULL.
using ResultValue = std::optional<Datum>;
// The rows of a set-returning function declared RETURNS TABLE; the function
// then returns Datum(0).
void return_rows(FunctionCallInfoBaseData* fcinfo, const std::vector<std::vector<ResultValue>>& rows);
// The value of a function declared with OUT parameters (RETURNS record, one
// row, usable in an expression: (f(x)).ok).
Datum composite_result(FunctionCallInfoBaseData* fcinfo, const std::vector<ResultValue>& values);

// A NOTICE to the client (does not interrupt the call).
void notice(const std::string& message, const std::string& detail = {});
// A WARNING to the client, with an optional hint and detail (does not
// interrupt the call).
void warning(const std::string& message, const std::string& hint = {}, const std::string& detail = {});

}  // namespace kvg::pg
