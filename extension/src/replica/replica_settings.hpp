// The settings of audit from a hot standby (docs/scale-out.md): how a standby
// reaches the primary to append its audit rows there, and whether an answer
// whose audit row cannot be recorded is returned anyway.
#pragma once

namespace kvg::pg::settings {

// From _PG_init (module.cpp), before the kvg prefix is reserved.
void define_replica();

const char* audit_conninfo();  // "" when unset
int audit_connect_timeout_ms();
// kvg.allow_unaudited: return an answer whose audit row could not be recorded
// (with a WARNING, 01V01) rather than refuse it.
bool allow_unaudited();

}  // namespace kvg::pg::settings
