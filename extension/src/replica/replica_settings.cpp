// Who may change what (all superuser):
//  kvg.audit_conninfo  hidden from others (it may hold a password): how a hot
//                      standby reaches the primary to append its audit rows
//                      there. Checked when set: libpq parses the string as it
//                      will when connecting, so a typo fails at SET, not at
//                      the first answer on the standby.
//  kvg.audit_connect_timeout
//                      how long a standby's call waits to connect.
//  kvg.allow_unaudited a call whose audit row cannot be recorded (a standby
//                      that cannot reach the primary, a primary whose audit
//                      writer is down) returns the answer anyway, with a
//                      WARNING (01V01) and no audit id. Off: it refuses.
#include "extension/src/replica/replica_settings.hpp"

#include "extension/src/pg/setting_check.hpp"
#include "extension/src/replica/conninfo.hpp"
#include "extension/src/pg/postgres.hpp"

namespace kvg::pg::settings {

namespace {

char* conninfo_value = nullptr;
int connect_timeout_ms_value = 5000;
bool allow_unaudited_value = false;

bool check_conninfo(char** newval, void**, GucSource) { return check_string_setting(newval, conninfo_problem); }

}  // namespace

void define_replica() {
  DefineCustomStringVariable("kvg.audit_conninfo",
                             "On a hot standby: libpq connection string of the primary, where audit rows are appended.",
                             "Its role must be a member of kvg_audit_writer; empty: a standby refuses audited calls.",
                             &conninfo_value, "", PGC_SUSET, GUC_SUPERUSER_ONLY, check_conninfo, nullptr, nullptr);
  DefineCustomIntVariable("kvg.audit_connect_timeout", "How long a standby waits to connect to the primary.", nullptr,
                          &connect_timeout_ms_value, 5000, 1, 600000, PGC_SUSET, GUC_UNIT_MS, nullptr, nullptr,
                          nullptr);
  DefineCustomBoolVariable("kvg.allow_unaudited",
                           "On a hot standby: return answers whose audit row the primary could not record.",
                           "Each such answer says so with a WARNING (SQLSTATE 01V01) and has no audit id.",
                           &allow_unaudited_value, false, PGC_SUSET, 0, nullptr, nullptr, nullptr);
}

const char* audit_conninfo() { return conninfo_value ? conninfo_value : ""; }
int audit_connect_timeout_ms() { return connect_timeout_ms_value; }
bool allow_unaudited() { return allow_unaudited_value; }

}  // namespace kvg::pg::settings
