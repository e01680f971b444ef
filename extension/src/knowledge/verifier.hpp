// Verifiers: how an entry of the library is checked before it is stored, and
// how a decoded answer is checked against it (docs/flywheel.md). The built-in
// forms (contains, exact:, regex:) run in SQL (kvg.verify): pure functions of
// their arguments. A function verifier is code one user wrote that others'
// calls run, so it is frozen and isolated (docs/security.md): at deposit the
// function and everything it calls are copied into kvg_frozen (what they may
// reach is checked first, by name), and every check runs that copy, pinned
// (kvg.function_pin), in a background worker of its own with kvg_verifier as
// session and current user (verifier_worker.hpp) — never in the asker's
// session, never with the asker's, the depositor's or a superuser's rights,
// and never anything the depositor changed after the deposit.
#pragma once

#include <optional>
#include <string>

namespace kvg::pg {

class Spi;

// A verifier as an entry holds it: canonical spec and, for a function, its
// frozen copy (kvg_frozen.v_...) and the copy's kvg.function_pin.
struct StoredVerifier {
  std::string spec;  // canonical: contains | exact:<text> | regex:<pattern> | "schema"."name"
  std::optional<std::string> pin;
  std::optional<std::string> frozen;
};

struct Verifier : StoredVerifier {
  enum class Kind { Contains, Exact, Regex, Function } kind = Kind::Contains;
};

// Parses what a caller wrote, resolving a function name with the caller's
// search_path into its qualified name, and freezing the function. Refuses
// (22023, 42883, 42804, 2201B) what cannot verify anything, a function
// verifier (42501) unless the caller is a member of kvg_author, and one
// (42P13) that reaches what a verifier may not (kvg.verifier_reach, named)
// or could not be frozen.
Verifier parse_verifier(Spi& spi, const std::string& text);

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
