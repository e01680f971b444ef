// The verifiers `kvg eval` runs without a database: the built-in forms of
// docs/flywheel.md "Verifiers", with the same word rule as kvg.answer_words
// and kvg.verify (sql/kvg--0.1.0.sql), so the CLI and SQL score alike.
// Function verifiers need PostgreSQL: the SQL evaluation (scripts/eval.sql)
// runs them.
#pragma once

#include <string>
#include <string_view>

namespace kvg::cli {

// ASCII letters lower-cased, every other ASCII character that is not a digit
// a separator, words joined by one space.
std::string answer_words(std::string_view text);

// Refuses (InvalidArgument, prefixed by `where`) a verifier that is not
// contains, exact:<words> or regex:<pattern> (compiled here), or a contains
// whose answer has no words.
void check_verifier(const std::string& verifier, const std::string& answer, const std::string& where);

// Whether `candidate` passes `verifier` with right answer `reference`.
bool verify_answer(const std::string& verifier, std::string_view candidate, std::string_view reference);

}  // namespace kvg::cli
