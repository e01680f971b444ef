// Function verifiers run isolated (docs/security.md, promise 8): never in the
// asking backend, never with the asker's, the depositor's or a superuser's
// rights, and only as frozen at deposit. Each request is a dynamic
// background worker of its own, connected to the asker's database.
//  * freeze: at deposit, the worker copies the depositor's function and
//    every function it reaches into kvg_frozen (verifier_freeze.hpp), checks
//    that the copy reaches nothing else a verifier may not, and commits it in
//    a transaction of its own, so that any session (the depositor's next
//    statement, another user's answer) can run it at once.
//  * run: the worker checks the frozen copy's pin (kvg.function_pin) in its
//    own snapshot and calls it by OID with kvg_verifier (NOLOGIN, no
//    memberships, no privileges) as session and current user, a
//    security-restricted operation with search_path pinned, within
//    kvg.verifier_timeout, and rolls its transaction back. Only the boolean
//    verdict, or why there is none, comes back; the asker's session (its
//    settings, prepared statements, cursors, locks) is never in reach.
#pragma once

#include <optional>
#include <string>

namespace kvg::pg::verifier_worker {

struct Outcome {
  bool passed = false;
  std::optional<std::string> refusal;  // why it failed closed; nullopt when it ran
  std::string frozen, pin;             // a freeze's copy: kvg_frozen.v_... and its pin
};

// From _PG_init: kvg.verifier_timeout (superuser), a verifier's worker
// transaction at most.
void define_settings();

// Runs the frozen verifier `frozen` (kvg_frozen.v_..., a function (text,
// text) returning boolean) pinned to `pin` on (question, candidate). Waits
// interruptibly: a cancel or statement_timeout of the asker stops the worker
// and raises here.
Outcome run(const std::string& frozen, const std::string& pin, const std::string& question,
            const std::string& candidate);

// Freezes the depositor's verifier `spec` ("schema"."name" of a function
// (text, text) returning boolean): the copy's name and pin, or why there is
// none (the function changed into one a verifier may not be, it calls
// itself, ...). The copy is committed whatever becomes of the caller's
// transaction; the same function frozen again is the same copy.
Outcome freeze(const std::string& spec);

}  // namespace kvg::pg::verifier_worker
