#include "extension/src/roles/standby.hpp"

#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/spi/spi.hpp"
#include "extension/src/pg/sql_raise.hpp"
#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "access/xlog.h"
}

namespace kvg::pg {

bool on_standby() {
  return call([] { return RecoveryInProgress(); });
}

void refuse_on_standby(const std::string& what, const std::string& because) {
  if (!on_standby()) return;
  // The SQLSTATE PostgreSQL itself gives any write on a standby.
  raise_sqlstate("25006", what + " cannot run on a standby: " + because,
                 "Run it on the primary (libpq target_session_attrs=read-write); what it stores reaches this "
                 "standby by replication (docs/scale-out.md).");
}

std::string replayed_up_to() {
  Spi spi;
  const auto rows = spi.run("SELECT pg_catalog.pg_last_wal_replay_lsn()::text");
  return rows.at(0).at(0).value_or("(unknown)");
}

}  // namespace kvg::pg
