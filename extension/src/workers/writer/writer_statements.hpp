// The statements kvg's writer runs (writer.hpp), registered by the concerns
// that own them: the audit row's insert (audit/audit.cpp), kvg.artifact_store
// (artifacts/lo_store.cpp). The writer knows a statement only by its kind:
// its SQL, its parameters' types, and how a refusal of it reads to a caller.
//
// A concern registers its statement in a namespace-scope constant of its own
// .cpp, so the registry is filled while kvg.so is loaded, before _PG_init:
// in the postmaster (shared_preload_libraries), whose children, the writers
// and every backend, inherit it; a process that loads kvg.so itself fills it
// in the same order. So a kind means the same statement in every process.
// Plain C++: no PostgreSQL here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvg::pg::writer {

// Which of a database's two writers runs a statement: rows (audit rows and
// the like: small, and every audited call waits for one) or artifacts (an
// artifact's bytes, up to kvg.max_import_bytes, and its storage charge).
// Two processes, each committing its own lane's requests in order, so that
// storing a large artifact never holds an audited call (docs/audit-chain.md).
enum class Lane : uint32_t { Rows = 0, Artifacts = 1 };

// A parameter's SQL type: each is passed as its bytes (a varlena), which
// the statement casts as it needs.
enum class ParameterType : uint8_t { Text, Bytea };

struct Statement {
  // What one request is called in the server log ("audit row").
  std::string name;
  // Returns one row whose first column (bigint) is the request's result.
  std::string sql;
  std::vector<ParameterType> parameters;
  // How a request refused because the writer is down (57V01) reads:
  // "kvg: " + refusal + ": " + why + ", so the call is refused", with this hint.
  std::string refusal;
  std::string refusal_hint;
  // When not empty, an error the statement itself raised reaches the caller
  // as that error, its message after this prefix; when empty, every failure
  // reads as the writer being down (57V01).
  std::string own_error_prefix;
  Lane lane = Lane::Rows;
};

// 0 is no statement (a zeroed request names none).
using StatementKind = uint32_t;

// Registers `statement`; its kind, the same in every process (above).
StatementKind register_statement(Statement statement);
// The statement of `kind`, or nullptr when none is registered under it.
const Statement* find_statement(StatementKind kind);

}  // namespace kvg::pg::writer
