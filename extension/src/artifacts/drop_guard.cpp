// kvg.drop_guard(): the event trigger that keeps DROP EXTENSION kvg (and
// DROP SCHEMA kvg CASCADE) from orphaning every artifact's large object.
// Large objects cannot be extension members, so dropping the extension drops
// kvg.artifacts but not the objects its rows name. The trigger fires at
// ddl_command_start, while the rows still exist, and unlinks the objects in
// the same transaction (a failed drop keeps them). See
// docs/artifact-lifecycle.md for why not sql_drop. It acts only for a role
// that may drop the extension (docs/security.md).
#include <string>

#include "extension/src/artifacts/artifact_cache.hpp"
#include "extension/src/roles/owner_rights.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "common/error.hpp"
#include "extension/src/spi/spi.hpp"
#include "extension/src/spi/sql_values.hpp"
#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "commands/event_trigger.h"
#include "commands/extension.h"
#include "nodes/parsenodes.h"
#include "utils/acl.h"
}

using namespace kvg;
using namespace kvg::pg;

namespace {

// Whether the statement drops kvg's extension or its schema (with CASCADE:
// without, the drop fails anyway and nothing needs doing).
bool drops_kvg(Node* parsetree) {
  if (!parsetree || !IsA(parsetree, DropStmt)) return false;
  const auto* drop = reinterpret_cast<DropStmt*>(parsetree);
  if (drop->removeType != OBJECT_EXTENSION &&
      !(drop->removeType == OBJECT_SCHEMA && drop->behavior == DROP_CASCADE))
    return false;
  ListCell* cell;
  foreach (cell, drop->objects) {
    Node* object = static_cast<Node*>(lfirst(cell));
    if (IsA(object, String) && std::string(strVal(object)) == "kvg") return true;
  }
  return false;
}

// Whether the calling role may drop what the statement names: it owns the
// extension (or the schema), or is a superuser. Anyone else's drop is
// refused by PostgreSQL right after this trigger; it must cost nothing and
// tell nothing before that.
bool may_drop(Node* parsetree) {
  const auto* drop = reinterpret_cast<DropStmt*>(parsetree);
  return call([&] {
    const Oid role = GetUserId();
    if (drop->removeType == OBJECT_EXTENSION) {
      const Oid ext = get_extension_oid("kvg", true);
      return OidIsValid(ext) && pg_extension_ownercheck(ext, role);
    }
    const Oid schema = get_namespace_oid("kvg", true);
    return OidIsValid(schema) && pg_namespace_ownercheck(schema, role);
  });
}

}  // namespace

KVG_SQL_FUNCTION(kvg_drop_guard) {
  if (!CALLED_AS_EVENT_TRIGGER(fcinfo)) throw Error(ErrorCode::Internal, "kvg_drop_guard must be called as an event trigger");
  const auto* event = reinterpret_cast<EventTriggerData*>(fcinfo->context);
  if (!drops_kvg(event->parsetree) || !may_drop(event->parsetree)) return PointerGetDatum(nullptr);
  // This backend's verified artifacts go with them (other backends' entries
  // are never served without their row: artifact_cache.hpp).
  backend_artifact_cache().shrink_to(0);
  Spi spi;
  OwnerRights owner;  // the objects belong to kvg's owner
  const auto rows = spi.run(
      "SELECT count(pg_catalog.lo_unlink(a.loid)) FROM kvg.artifacts a "
      "WHERE EXISTS (SELECT FROM pg_catalog.pg_largeobject_metadata m WHERE m.oid = a.loid)");
  const std::string n = rows.at(0).at(0).value_or("0");
  if (n != "0") notice("kvg: unlinked " + n + " artifact large object" + (n == "1" ? "" : "s") + " with the extension");
  return PointerGetDatum(nullptr);
}
