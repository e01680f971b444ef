#include "extension/src/replica/conninfo.hpp"

// Not postgres.hpp: libpq-fe.h declares lo_read and lo_write differently
// from the server's be-fsstubs.h.
#include "libpq-fe.h"

namespace kvg::pg {

std::string libpq_message(const char* text) {
  std::string s = text ? text : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s.empty() ? "no message from libpq" : s;
}

std::optional<std::string> conninfo_problem(const char* conninfo) {
  char* problem = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo, &problem);
  if (options) {
    PQconninfoFree(options);
    return std::nullopt;
  }
  const std::string why = libpq_message(problem);
  if (problem) PQfreemem(problem);
  return why;
}

}  // namespace kvg::pg
