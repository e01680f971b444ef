// The registry of the writer's statements (writer_statements.hpp).
#include "extension/src/workers/writer/writer_statements.hpp"

#include <utility>

namespace kvg::pg::writer {

namespace {

// A function's static: the registrations run while kvg.so is loaded, in an
// order between files that no rule fixes, so the registry is made on first use.
std::vector<Statement>& registry() {
  static std::vector<Statement> statements;
  return statements;
}

}  // namespace

StatementKind register_statement(Statement statement) {
  registry().push_back(std::move(statement));
  return StatementKind(registry().size());
}

const Statement* find_statement(StatementKind kind) {
  if (kind == 0 || kind > registry().size()) return nullptr;
  return &registry()[kind - 1];
}

}  // namespace kvg::pg::writer
