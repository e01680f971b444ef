#include "extension/src/pg/sql_raise.hpp"

#include "common/error.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/pg/postgres.hpp"

namespace kvg::pg {

void raise_sqlstate(const char* sqlstate, const std::string& message, const std::string& hint,
                    const std::string& detail) {
  const char* s = sqlstate;
  const char* m = message.c_str();
  const char* h = hint.empty() ? nullptr : hint.c_str();
  const char* d = detail.empty() ? nullptr : detail.c_str();
  call([s, m, h, d] {
    ereport(ERROR, (errcode(MAKE_SQLSTATE(s[0], s[1], s[2], s[3], s[4])), errmsg_internal("%s", m),
                    h ? errhint("%s", h) : 0, d ? errdetail_internal("%s", d) : 0));
  });
  throw Error(ErrorCode::Internal, "ereport(ERROR) returned");  // unreachable
}

}  // namespace kvg::pg
