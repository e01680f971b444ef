// Freezing a function verifier at deposit (docs/security.md, promise 8): the
// function and every function it reaches that is not built in are copied
// into schema kvg_frozen, owned by the extension's owner, each copy's calls
// bound (by OID) to the copies of its callees. Answers run the copy, so no
// later CREATE OR REPLACE, ALTER, DROP or race of its depositor's (or of
// any non-superuser's) changes what runs. A copy is named by the SHA-256 of
// what it is (signature, attributes, body with its callees' copies), so the
// same function frozen twice is one copy.
//
// Only verifier_worker_main.cpp includes this, after postgres.hpp: it runs in
// the verifier worker, in a transaction of its own that commits, as the
// bootstrap superuser, under SPI; C style, like that file (nothing throws).
#pragma once

namespace kvg::pg::verifier_worker {

// The copy of `fn` (made now, or found made before), or InvalidOid with
// *refusal set to a literal that says why not. Takes a transaction-scoped
// advisory lock, so that two freezes of one function do not race to create
// the same copy. The caller checks what the copy reaches (kvg.verifier_reach)
// before it commits.
Oid freeze_function(Oid fn, const char** refusal);

}  // namespace kvg::pg::verifier_worker
