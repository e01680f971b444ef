// Hot standbys (docs/scale-out.md). A standby answers from the replicated
// library and artifacts, forwards its audit rows to the primary
// (audit_forward.hpp) and refuses what would write: capturing, learning,
// solving, importing, storing a composition.
#pragma once

#include <string>

namespace kvg::pg {

// True while this server replays WAL (a hot standby), false on a primary and
// once a standby has been promoted.
bool on_standby();

// On a standby, raises 25006 read_only_sql_transaction saying that `what`
// (e.g. "kvg_learn") needs the primary and why (`because`). Does nothing on a
// primary.
void refuse_on_standby(const std::string& what, const std::string& because);

// How far this standby has replayed the primary's WAL, as pg_lsn text, for
// messages about data that may simply not have arrived yet.
std::string replayed_up_to();

}  // namespace kvg::pg
