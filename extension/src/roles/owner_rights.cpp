#include "extension/src/roles/owner_rights.hpp"

#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/spi/spi.hpp"
#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "utils/acl.h"
#include "utils/syscache.h"
}

namespace kvg::pg {

namespace {

Oid kvg_schema_owner() {
  return call([] {
    Oid schema = get_namespace_oid("kvg", false);
    HeapTuple tuple = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(schema));
    if (!HeapTupleIsValid(tuple)) elog(ERROR, "kvg: cache lookup failed for schema %u", schema);
    Oid owner = reinterpret_cast<Form_pg_namespace>(GETSTRUCT(tuple))->nspowner;
    ReleaseSysCache(tuple);
    return owner;
  });
}

}  // namespace

RunAs::RunAs(unsigned role, bool restricted) {
  Oid caller;
  call([&] { GetUserIdAndSecContext(&caller, &caller_security_); });
  caller_ = caller;
  const int flags = SECURITY_LOCAL_USERID_CHANGE | (restricted ? SECURITY_RESTRICTED_OPERATION : 0);
  call([&] {
    SetUserIdAndSecContext(role, caller_security_ | flags);
    guc_level_ = NewGUCNestLevel();
    set_config_option("search_path", kPinnedSearchPath, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
                      false);
  });
}

OwnerRights::OwnerRights() : RunAs(kvg_schema_owner(), false) {}

std::optional<unsigned> role_oid(const std::string& name) {
  const Oid role = call([&] { return get_role_oid(name.c_str(), true); });
  return role == InvalidOid ? std::nullopt : std::optional<unsigned>(role);
}

RunAs::~RunAs() {
  // After an ERROR the transaction abort pops the GUC level itself; the
  // identity is restored here either way (a plain assignment, cannot fail).
  cleanup([this] { AtEOXact_GUC(false, guc_level_); });
  SetUserIdAndSecContext(caller_, caller_security_);
}

namespace {

std::string role_name(Oid role) {
  const char* name = call([role] { return GetUserNameFromId(role, false); });
  return name;
}

}  // namespace

std::string calling_role() { return role_name(GetUserId()); }

std::string session_role() { return role_name(GetSessionUserId()); }

}  // namespace kvg::pg
