// JSONL in and out for `kvg eval`. Each line is one flat JSON object; the
// parser below reads exactly that (strings with every JSON escape, and
// numbers, booleans and null for keys it does not use) and names the line
// and column of anything else.
#include "cli/eval/eval_items.hpp"

#include <fstream>
#include <map>
#include <sstream>

#include "cli/args.hpp"
#include "cli/eval/eval_verifier.hpp"
#include "common/error.hpp"
#include "common/utf8.hpp"

namespace kvg::cli {

namespace {

// Bounds checked before anything is parsed.
constexpr size_t kMaxLineBytes = 1 << 20;
constexpr size_t kMaxItems = 100000;

class LineParser {
 public:
  LineParser(std::string_view text, const std::string& where) : s_(text), where_(where) {}

  // The object's string-valued keys; other values are checked and skipped.
  std::map<std::string, std::string> object() {
    std::map<std::string, std::string> out;
    space();
    expect('{');
    space();
    if (peek() == '}') {
      ++i_;
    } else {
      for (;;) {
        space();
        std::string key = string();
        space();
        expect(':');
        space();
        if (peek() == '"') {
          std::string value = string();
          if (!out.emplace(key, std::move(value)).second) fail("the key \"" + key + "\" appears twice");
        } else {
          other(key);
        }
        space();
        if (peek() == ',') { ++i_; continue; }
        expect('}');
        break;
      }
    }
    space();
    if (i_ != s_.size()) fail("text after the object");
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorCode::InvalidArgument, where_ + ": not a JSON object line: " + what + " (at column " +
                                                std::to_string(i_ + 1) + ")");
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  uint32_t hex4() {
    if (i_ + 4 > s_.size()) fail("a \\u escape needs four hex digits");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[i_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f') v |= uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= uint32_t(c - 'A' + 10);
      else fail("a \\u escape needs four hex digits");
    }
    return v;
  }
  std::string string() {
    expect('"');
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) fail("an unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (uint8_t(c) < 0x20) fail("a control character inside a string");
      if (c != '\\') { out += c; continue; }
      if (i_ >= s_.size()) fail("an unterminated string");
      switch (const char e = s_[i_++]) {
        case '"': case '\\': case '/': out += e; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {  // a surrogate pair
            if (s_.substr(i_, 2) != "\\u") fail("an unpaired surrogate");
            i_ += 2;
            const uint32_t low = hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("an unpaired surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail("an unpaired surrogate");
          }
          append_utf8(cp, out);
          break;
        }
        default: fail(std::string("an unknown escape \\") + e);
      }
    }
  }
  // A value this harness does not use: a number, true, false or null. Nested
  // objects and arrays are refused (no item field is one).
  void other(const std::string& key) {
    const size_t start = i_;
    for (const std::string_view word : {"true", "false", "null"})
      if (s_.substr(i_, word.size()) == word) { i_ += word.size(); return; }
    while (i_ < s_.size() && (std::isdigit(uint8_t(s_[i_])) || s_[i_] == '-' || s_[i_] == '+' || s_[i_] == '.' ||
                              s_[i_] == 'e' || s_[i_] == 'E'))
      ++i_;
    if (i_ == start) fail("the value of \"" + key + "\" is not a string, number, boolean or null");
  }

  std::string_view s_;
  std::string where_;
  size_t i_ = 0;
};

const std::string& required(const std::map<std::string, std::string>& fields, const char* key,
                            const std::string& where) {
  const auto it = fields.find(key);
  if (it == fields.end() || it->second.empty())
    throw Error(ErrorCode::InvalidArgument, where + ": \"" + key + "\" is missing or empty");
  return it->second;
}

std::string optional(const std::map<std::string, std::string>& fields, const char* key, std::string fallback = "") {
  const auto it = fields.find(key);
  return it == fields.end() ? fallback : it->second;
}

}  // namespace

std::vector<EvalItem> read_eval_items(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::NotFound, path + ": cannot open the question file");
  std::vector<EvalItem> items;
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::string where = path + ":" + std::to_string(number);
    if (line.size() > kMaxLineBytes)
      throw Error(ErrorCode::InvalidArgument, where + ": a line of more than " + std::to_string(kMaxLineBytes) +
                                                  " bytes");
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (items.size() == kMaxItems)
      throw Error(ErrorCode::InvalidArgument, where + ": more than " + std::to_string(kMaxItems) + " items");
    const std::map<std::string, std::string> fields = LineParser(line, where).object();
    EvalItem item;
    item.question = required(fields, "question", where);
    item.answer = required(fields, "answer", where);
    item.verifier = optional(fields, "verifier", "contains");
    item.solution = optional(fields, "solution");
    item.kind = optional(fields, "kind");
    item.family = optional(fields, "family");
    check_verifier(item.verifier, item.answer, where);
    items.push_back(std::move(item));
  }
  if (items.empty()) throw Error(ErrorCode::InvalidArgument, path + ": the file holds no questions (it is empty)");
  return items;
}

std::string eval_items_jsonl(const std::vector<EvalItem>& items) {
  std::ostringstream out;
  for (const EvalItem& item : items) {
    out << "{\"question\": \"" << json_escape(item.question) << "\", \"answer\": \"" << json_escape(item.answer)
        << "\", \"verifier\": \"" << json_escape(item.verifier) << "\"";
    if (!item.solution.empty()) out << ", \"solution\": \"" << json_escape(item.solution) << "\"";
    if (!item.kind.empty()) out << ", \"kind\": \"" << json_escape(item.kind) << "\"";
    if (!item.family.empty()) out << ", \"family\": \"" << json_escape(item.family) << "\"";
    out << "}\n";
  }
  return out.str();
}

}  // namespace kvg::cli
