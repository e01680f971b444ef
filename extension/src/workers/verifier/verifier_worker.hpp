// Function verifiers run isolated (docs/security.md, promise 8): never in the
// asking backend, never with the asker's, the depositor's or a superuser's
// rights. Each verification is a dynamic background worker of its own,
// connected to the asker's database: it recomputes the verifier's pin
// (kvg.function_pin, everything the function reaches) in its own snapshot,
// calls the function by OID as the role kvg_verifier (NOLOGIN, no
// memberships) as a security-restricted operation with search_path pinned,
// within kvg.verifier_timeout, checks the pin again, and rolls its
// transaction back. Only the boolean verdict, or why there is none, comes
// back; the asker's session (its settings, prepared statements, cursors,
// locks) is never in reach.
#pragma once

#include <optional>
#include <string>

namespace kvg::pg::verifier_worker {

struct Outcome {
  bool passed = false;
  std::optional<std::string> refusal;  // why it failed closed; nullopt when it ran
};

// From _PG_init: kvg.verifier_timeout (superuser), a verifier's worker
// transaction at most.
void define_settings();

// Runs verifier `spec` ("schema"."name" of a function (text, text) returning
// boolean) pinned to `pin` on (question, candidate). Waits interruptibly: a
// cancel or statement_timeout of the asker stops the worker and raises here.
Outcome run(const std::string& spec, const std::string& pin, const std::string& question,
            const std::string& candidate);

}  // namespace kvg::pg::verifier_worker
