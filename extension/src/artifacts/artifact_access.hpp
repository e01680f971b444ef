// Which artifacts a caller may name (docs/security.md, "Artifacts are
// private to who caused them"): its own (stored by a committed call of its
// session user, or by an earlier statement of its own transaction), those
// the shared library publishes, and every artifact for kvg_auditor, the
// extension's owner and superusers. The row-level security policies on
// kvg.artifacts (sql/kvg--1.0.0.sql) are the rule; this runs a query under
// them with the caller's own rights, so the rule is written once.
#pragma once

#include "storage/artifact_format.hpp"

namespace kvg::pg {

class Spi;

// Returns when the caller may read every link of the chain ending in `leaf`.
// Otherwise refuses with 42501, the same error whether the artifact is
// someone else's or not stored at all, so the refusal tells nothing about
// other users' artifacts. A caller who reads every artifact passes: the
// call then says "is not stored" (42704) where it reads an unknown one, as
// it always did. Must not run with the owner's rights (owner_rights.hpp),
// which the policies do not apply to.
void require_readable(Spi& spi, const Digest& leaf);

}  // namespace kvg::pg
