// Verifiers: how an entry of the library is checked before it is stored, and
// how a decoded answer is checked against it (docs/flywheel.md). The built-in
// forms (contains, exact:, regex:) run in SQL (kvg.verify): pure functions of
// their arguments. A function verifier is code one user wrote that others'
// calls run, so it is pinned and isolated (docs/security.md): pinned at
// deposit (kvg.function_pin: the definitions of everything it reaches), never
// run once its pin changed, and run in a background worker of its own as
// the role kvg_verifier (verifier_worker.hpp) — never in the asker's session,
// never with the asker's, the depositor's or a superuser's rights.
#pragma once

#include <optional>
#include <string>

namespace kvg::pg {

class Spi;

struct Verifier {
  enum class Kind { Contains, Exact, Regex, Function } kind = Kind::Contains;
  std::string spec;  // canonical: contains | exact:<text> | regex:<pattern> | "schema"."name"
  std::optional<std::string> pin;  // a function's kvg.function_pin when parsed
};

// Parses what a caller wrote, resolving a function name with the caller's
// search_path into its qualified name and pinning it. Refuses (22023, 42883,
// 42804, 2201B) what cannot verify anything, a function verifier (42501)
// unless the caller is a member of kvg_author, and one (42P13) that reaches
// a function that is neither atomic SQL nor built in.
Verifier parse_verifier(Spi& spi, const std::string& text);

// A verifier as an entry holds it: canonical spec and pin.
struct StoredVerifier {
  std::string spec;
  std::optional<std::string> pin;
};

struct Verdict {
  bool passed = false;
  // Why a function verifier was not run (it failed closed), or nullopt.
  std::optional<std::string> refusal;
};

// Whether `candidate` passes: for contains, it must contain `reference`; the
// other kinds carry their own expectation (reference is ignored).
Verdict check(Spi& spi, const StoredVerifier& verifier, const std::string& question, const std::string& candidate,
              const std::optional<std::string>& reference);

// What a deposit's check established, for kvg.knowledge.evidence.
std::string evidence(const Verifier& verifier, const std::string& answer);

}  // namespace kvg::pg
