// An answer is one line. Decoding an answer stops at the first newline that
// follows visible text (or at end of sequence, or at the token budget): the
// model may open with blank lines, but once it has said something, the end
// of the line is the end of the answer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/tokenizer.hpp"

namespace kvg {

// The first line of `text` with visible characters, without surrounding
// whitespace ("" when there is none).
std::string first_line(std::string_view text);

// Follows decoded tokens (GenerateOptions::on_token) and says when the line
// is complete.
class AnswerLine {
 public:
  // `previous`: the last prompt token, which decides whether the first
  // piece's leading space is text (it is, after anything but BOS).
  AnswerLine(const Tokenizer& tokenizer, int32_t previous) : tokenizer_(tokenizer), previous_(previous) {}

  // Appends the token's text; false once the answer line is complete.
  bool feed(int32_t token);
  std::string answer() const { return first_line(text_); }

 private:
  const Tokenizer& tokenizer_;
  int32_t previous_;
  std::string text_;
};

}  // namespace kvg
