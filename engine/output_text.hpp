// What the model's output bytes become as text. A model emits bytes, not
// characters: byte tokens (<0x80>, ...) can produce sequences that are not
// UTF-8, or a character split across tokens that the output budget cuts off.
// Text results must still be valid text (PostgreSQL refuses anything else,
// JSON too), and nothing may be lost: the raw bytes stay available beside
// the text (docs/output-bytes.md).
//
// The rule is Unicode's "U+FFFD substitution of maximal subparts" (the
// Unicode Standard, chapter 3, "U+FFFD Substitution"; WHATWG's UTF-8 decode;
// Python's bytes.decode("utf-8", "replace")): each maximal subpart of an
// ill-formed sequence becomes one U+FFFD. NUL (U+0000), valid UTF-8 but not
// storable in PostgreSQL text, becomes U+FFFD too.
#pragma once

#include <string>
#include <string_view>

namespace kvg {

inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// `bytes` as valid UTF-8 without NUL: the same bytes when they already are.
std::string output_text(std::string_view bytes);

// True when output_text(bytes) == bytes.
bool is_output_text(std::string_view bytes);

// Streaming: bytes arrive a token at a time; a character split across tokens
// is held back until it completes, so that what is printed is exactly
// output_text() of everything fed, in pieces.
class OutputTextStream {
 public:
  // The text that is final after `bytes` (possibly empty).
  std::string feed(std::string_view bytes);
  // The rest: a held-back incomplete sequence becomes U+FFFD.
  std::string finish();

 private:
  std::string pending_;
};

}  // namespace kvg
