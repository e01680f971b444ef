#include "engine/answer_line.hpp"

namespace kvg {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string first_line(std::string_view text) {
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = trim(text.substr(0, end));
    if (!line.empty() || end == std::string_view::npos) return std::string(line);
    text.remove_prefix(end + 1);
  }
  return "";
}

bool AnswerLine::feed(int32_t token) {
  text_ += tokenizer_.decode_piece(token, previous_);
  previous_ = token;
  // Complete when a newline follows visible text.
  const size_t newline = text_.rfind('\n');
  return newline == std::string::npos || trim(std::string_view(text_).substr(0, newline)).empty();
}

}  // namespace kvg
