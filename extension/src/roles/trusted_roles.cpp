#include "extension/src/roles/trusted_roles.hpp"

#include "extension/src/spi/spi.hpp"
#include "extension/src/pg/sql_raise.hpp"

namespace kvg::pg {

void require_author(Spi& spi, const std::string& what, const std::string& hint) {
  if (spi.run("SELECT pg_catalog.pg_has_role(current_user, 'kvg_author', 'USAGE')").at(0).at(0) != SqlValue("t"))
    raise_sqlstate("42501", what + " needs the role kvg_author", hint);
}

}  // namespace kvg::pg
