// Verifiers: how an entry of the library is checked before it is stored, and
// how a decoded answer is checked against it (docs/flywheel.md). The checks
// themselves run in SQL (kvg.verify), as the calling role, so a function
// verifier has exactly the caller's rights.
#pragma once

#include <optional>
#include <string>

namespace kvg::pg {

class Spi;

struct Verifier {
  enum class Kind { Contains, Exact, Regex, Function } kind = Kind::Contains;
  std::string spec;  // canonical: contains | exact:<text> | regex:<pattern> | "schema"."name"
};

// Parses what a caller wrote, resolving a function name with the caller's
// search_path into its qualified name. Refuses (22023, 42883, 42804, 2201B)
// what cannot verify anything.
Verifier parse_verifier(Spi& spi, const std::string& text);

// Whether `candidate` passes: for contains, it must contain `reference`; the
// other kinds carry their own expectation (reference is ignored).
// `verifier` is a canonical spec (Verifier::spec, kvg.knowledge.verifier).
bool passes(Spi& spi, const std::string& verifier, const std::string& question, const std::string& candidate,
            const std::optional<std::string>& reference);

// What a deposit's check established, for kvg.knowledge.evidence.
std::string evidence(const Verifier& verifier, const std::string& answer);

}  // namespace kvg::pg
