#include "cli/eval/eval_verifier.hpp"

#include <regex>

#include "common/error.hpp"

namespace kvg::cli {

namespace {

bool separator(unsigned char c) {
  // kvg.answer_words: [\x01-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]
  return (c >= 0x01 && c <= 0x2f) || (c >= 0x3a && c <= 0x40) || (c >= 0x5b && c <= 0x60) ||
         (c >= 0x7b && c <= 0x7f);
}

}  // namespace

std::string answer_words(std::string_view text) {
  std::string out;
  bool pending_space = false;
  for (const char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (separator(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : ch;
  }
  return out;
}

void check_verifier(const std::string& verifier, const std::string& answer, const std::string& where) {
  if (verifier == "contains") {
    if (answer_words(answer).empty())
      throw Error(ErrorCode::InvalidArgument, where + ": the answer has no words for the contains verifier");
    return;
  }
  if (verifier.rfind("exact:", 0) == 0) {
    if (answer_words(verifier.substr(6)).empty())
      throw Error(ErrorCode::InvalidArgument, where + ": verifier \"exact:\" without words");
    return;
  }
  if (verifier.rfind("regex:", 0) == 0) {
    try {
      std::regex(verifier.substr(6), std::regex::extended);
    } catch (const std::regex_error& e) {
      throw Error(ErrorCode::InvalidArgument, where + ": verifier \"" + verifier + "\" does not compile: " + e.what());
    }
    return;
  }
  throw Error(ErrorCode::InvalidArgument,
              where + ": unknown verifier \"" + verifier +
                  "\" (kvg eval runs contains, exact:<text> and regex:<pattern>; a function verifier runs in SQL: "
                  "scripts/eval.sql)");
}

bool verify_answer(const std::string& verifier, std::string_view candidate, std::string_view reference) {
  if (verifier == "contains") {
    const std::string want = answer_words(reference);
    return !want.empty() && (" " + answer_words(candidate) + " ").find(" " + want + " ") != std::string::npos;
  }
  if (verifier.rfind("exact:", 0) == 0) return answer_words(candidate) == answer_words(verifier.substr(6));
  if (verifier.rfind("regex:", 0) == 0)
    return std::regex_search(std::string(candidate), std::regex(verifier.substr(6), std::regex::extended));
  throw Error(ErrorCode::InvalidArgument, "unknown verifier \"" + verifier + "\"");
}

}  // namespace kvg::cli
