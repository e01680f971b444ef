#include "extension/src/audit/unaudited_warning.hpp"

#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/pg/postgres.hpp"

namespace kvg::pg {

void warn_unaudited(const std::string& operation, const std::string& why) {
  const std::string message = "kvg: the result of this " + operation + " call is NOT audited: " + why;
  call([&] {
    ereport(WARNING, (errcode(MAKE_SQLSTATE('0', '1', 'V', '0', '1')), errmsg_internal("%s", message.c_str()),
                      errdetail("kvg.allow_unaudited is on: a superuser allowed results whose audit row could not "
                                "be recorded.")));
  });
}

}  // namespace kvg::pg
