// libpq's reading of a connection string, for the setting that holds one
// (kvg.audit_conninfo, checked at SET) and the link that connects with it
// (primary_link.hpp). Needs no server: replica_settings.cpp includes it without
// depending on the link.
#pragma once

#include <optional>
#include <string>

namespace kvg::pg {

// Why libpq cannot parse `conninfo` as a connection string; nullopt when it can.
std::optional<std::string> conninfo_problem(const char* conninfo);

// A libpq message without its trailing newline (ours have none).
std::string libpq_message(const char* text);

}  // namespace kvg::pg
