// Catalog rows, audit rows and large objects are written as the owner of the
// kvg schema (the extension's owner), never as the calling role. A kvg_user
// therefore needs no INSERT on kvg.artifacts or kvg.audit (so it cannot forge
// rows) and never owns an artifact's large object (so it cannot lo_put into
// it or lo_unlink it). This is SECURITY DEFINER done in C, for the narrow
// statements kvg itself issues, with the protections of a definer function
// with SET search_path: the identity switch is SECURITY_LOCAL_USERID_CHANGE
// (SET ROLE is refused meanwhile) and search_path is pinned to pg_catalog,
// pg_temp, so no operator or function of the caller's can stand in for ours.
// (Not SECURITY_RESTRICTED_OPERATION: it refuses to queue deferred triggers,
// and kvg.artifacts' parent foreign key is deferred.)
#pragma once

#include <optional>
#include <string>

namespace kvg::pg {

// Runs what follows, until destruction, as `role` with search_path pinned
// to pg_catalog, pg_temp. `restricted` adds SECURITY_RESTRICTED_OPERATION,
// as PostgreSQL does when it evaluates an index expression as the table's
// owner: the code run cannot change the session (SET ROLE, temporary
// objects, cursors that outlive it) to act later with other rights.
class RunAs {
 public:
  RunAs(unsigned role, bool restricted);
  ~RunAs();  // restores the caller's identity and search_path
  RunAs(const RunAs&) = delete;
  RunAs& operator=(const RunAs&) = delete;

 private:
  unsigned caller_;   // Oid
  int caller_security_;
  int guc_level_ = 0;
};

// The owner of schema kvg, unrestricted (its statements queue deferred
// triggers: kvg.artifacts' parent key, the audit link).
class OwnerRights : public RunAs {
 public:
  OwnerRights();
};

// A role's OID by name; nullopt when no such role exists.
std::optional<unsigned> role_oid(const std::string& name);

// The role the SQL function runs as (before any OwnerRights): recorded as
// kvg.artifacts.created_by and kvg.audit.role.
std::string calling_role();

// The session user (SET ROLE does not change it): recorded as
// kvg.audit.session_role, and charged for what a call stores
// (kvg.storage_quota).
std::string session_role();

}  // namespace kvg::pg
