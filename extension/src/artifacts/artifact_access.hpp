// Which artifacts a caller may name (docs/security.md, "Artifacts are
// private to who caused them"): its own (stored by a committed call of its
// session user, or by an earlier statement of its own transaction), those
// the shared library publishes, and every artifact for kvg_auditor, the
// extension's owner and superusers. kvg.artifact_readable
// (sql/kvg--1.0.0.sql) is the rule for one artifact; users do not read
// kvg.artifacts themselves (a plan would count other users' rows), so these
// checks read it with the owner's rights and ask that rule of each row.
#pragma once

#include "storage/artifact_format.hpp"

namespace kvg::pg {

class Spi;

// Whether the calling role (current user) reads every artifact: a
// superuser, kvg_auditor, or the owner of schema kvg. Asked as the caller,
// before any OwnerRights.
bool caller_reads_every_artifact(Spi& spi);

// Returns when the caller may read the artifact `leaf` itself and every
// link of the chain that ends in it: a continuation of someone else's
// artifact is as private as that artifact. Otherwise refuses with 42501,
// the same error whether the artifact is someone else's or not stored at
// all, so the refusal tells nothing about other users' artifacts. A caller
// who reads every artifact passes: the call then says "is not stored"
// (42704) where it reads an unknown one, as it always did. Runs as the
// caller (it asks who the caller is), not within OwnerRights.
void require_readable(Spi& spi, const Digest& leaf);

}  // namespace kvg::pg
