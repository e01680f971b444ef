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

// Whether the copy `fn`, and every copy it calls, is still what it was
// frozen as: each one's name is the hash of its row's signature, attributes
// and body, so this needs no SQL (kvg.function_pin takes tens of ms in a
// fresh worker). False for a copy a superuser changed, and for one restored
// from a dump (its body is parsed anew): then the caller checks the pin.
bool frozen_intact(Oid fn);

}  // namespace kvg::pg::verifier_worker
