// What only roles trusted with the shared library may do (docs/security.md):
// members of kvg_author (superusers are) write function verifiers and
// deposit entries other users' answers are built from.
#pragma once

#include <string>

namespace kvg::pg {

class Spi;

// Refuses (42501 "<what> needs the role kvg_author", with `hint`) a calling
// role that is not a member of kvg_author.
void require_author(Spi& spi, const std::string& what, const std::string& hint);

}  // namespace kvg::pg
