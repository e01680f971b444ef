// The constraint triggers that stand for kvg.knowledge's foreign key to
// kvg.artifacts (sql/kvg--1.0.0.sql, kvg.knowledge_artifact_check).
//
// Artifacts are stored by the audit writer in transactions of its own
// (lo_store.hpp), so the artifact of a REPEATABLE READ or SERIALIZABLE learn
// was committed after the learner's snapshot was taken. A foreign key checks
// an insert under that snapshot and would not find it; these triggers check
// under the latest committed state instead, with the same locking as a
// foreign key: the inserting side locks the artifact row FOR KEY SHARE (a
// delete waits for it), and the deleting side, which holds the row it
// deleted, looks for entries that name it, committed ones included.
#include <string>

#include "common/error.hpp"
#include "extension/src/roles/owner_rights.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/spi/spi.hpp"
#include "extension/src/pg/sql_raise.hpp"
#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "commands/trigger.h"
}

using namespace kvg;
using namespace kvg::pg;

namespace {

// The text value of `column` in the row the trigger fired for.
std::string row_value(FunctionCallInfo fcinfo, const char* column, const char* trigger) {
  if (!CALLED_AS_TRIGGER(fcinfo)) throw Error(ErrorCode::Internal, std::string(trigger) + " must be called as a trigger");
  const auto* data = reinterpret_cast<TriggerData*>(fcinfo->context);
  HeapTuple row = TRIGGER_FIRED_BY_UPDATE(data->tg_event) ? data->tg_newtuple : data->tg_trigtuple;
  const char* value = call([&] {
    TupleDesc desc = RelationGetDescr(data->tg_relation);
    return SPI_getvalue(row, desc, SPI_fnumber(desc, column));
  });
  if (!value) throw Error(ErrorCode::Internal, std::string(trigger) + ": " + column + " is NULL");
  return value;
}

}  // namespace

// AFTER INSERT OR UPDATE OF artifact_sha256 ON kvg.knowledge, deferred.
KVG_SQL_FUNCTION(kvg_knowledge_artifact_check) {
  const std::string artifact = row_value(fcinfo, "artifact_sha256", "kvg_knowledge_artifact_check");
  Spi spi;
  OwnerRights owner;  // locking needs more than the caller's SELECT on kvg.artifacts
  if (spi.run_latest("SELECT 1 FROM kvg.artifacts WHERE sha256 = $1 FOR KEY SHARE", {artifact}).empty())
    raise_sqlstate("23503", "kvg: a library entry's artifact " + artifact + " is not stored",
                   "Store the artifact before the entry that names it (kvg_learn does both).",
                   "kvg.knowledge.artifact_sha256 must name a row of kvg.artifacts.");
  return PointerGetDatum(nullptr);
}

// AFTER DELETE ON kvg.artifacts, deferred.
KVG_SQL_FUNCTION(kvg_artifact_entry_check) {
  const std::string artifact = row_value(fcinfo, "sha256", "kvg_artifact_entry_check");
  Spi spi;
  OwnerRights owner;
  const auto entries = spi.run_latest(
      "SELECT k.id FROM kvg.knowledge k WHERE k.artifact_sha256 = $1 "
      "AND NOT EXISTS (SELECT FROM kvg.artifacts a WHERE a.sha256 = $1) ORDER BY k.id LIMIT 1",
      {artifact});
  if (!entries.empty())
    raise_sqlstate("23503",
                   "kvg: artifact " + artifact + " is deleted, but library entry " + entries[0].at(0).value_or("?") +
                       " names it",
                   "kvg_artifact_delete(artifact, force => true) deletes the entries with it.",
                   "kvg.knowledge.artifact_sha256 must name a row of kvg.artifacts.");
  return PointerGetDatum(nullptr);
}
