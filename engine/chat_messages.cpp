// A small strict JSON reader for one shape (engine/chat_messages.hpp), so
// that neither the engine nor the CLI needs a JSON library: no recursion, no
// numbers, every byte looked at once.
#include "engine/chat_messages.hpp"

#include <cstdint>
#include <string>

#include "common/error.hpp"
#include "common/utf8.hpp"

namespace kvg {

namespace {

class Reader {
 public:
  explicit Reader(std::string_view text) : s_(text) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorCode::InvalidArgument, "chat messages JSON at byte " + std::to_string(at_) + ": " + what);
  }
  void skip_space() {
    while (at_ < s_.size() && (s_[at_] == ' ' || s_[at_] == '\t' || s_[at_] == '\n' || s_[at_] == '\r')) ++at_;
  }
  // Skips whitespace; true (and consumed) when the next byte is `c`.
  bool take(char c) {
    skip_space();
    if (at_ < s_.size() && s_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  void expect(char c, const char* what) {
    if (!take(c)) fail(std::string("expected ") + what);
  }
  bool at_end() {
    skip_space();
    return at_ == s_.size();
  }
  std::string string(const char* what) {
    skip_space();
    if (at_ >= s_.size() || s_[at_] != '"') fail(std::string(what) + " must be a string");
    ++at_;
    std::string out;
    while (true) {
      if (at_ >= s_.size()) fail("unterminated string");
      const unsigned char c = static_cast<unsigned char>(s_[at_++]);
      if (c == '"') return out;
      if (c < 0x20) fail("a control character inside a string must be escaped");
      if (c != '\\') {
        out += char(c);
        continue;
      }
      if (at_ >= s_.size()) fail("unterminated escape");
      const char e = s_[at_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': append_utf8(code_point(), out); break;
        default: fail(std::string("unknown escape \\") + e);
      }
    }
  }

 private:
  uint32_t hex4() {
    if (s_.size() - at_ < 4) fail("\\u needs four hex digits");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[at_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f') v |= uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= uint32_t(c - 'A' + 10);
      else fail("\\u needs four hex digits");
    }
    return v;
  }
  // After "\u": one code point, a surrogate pair joined.
  uint32_t code_point() {
    const uint32_t hi = hex4();
    if (hi >= 0xDC00 && hi <= 0xDFFF) fail("a lone low surrogate");
    if (hi < 0xD800 || hi > 0xDBFF) return hi;
    if (s_.substr(at_, 2) != "\\u") fail("a high surrogate without its low half");
    at_ += 2;
    const uint32_t lo = hex4();
    if (lo < 0xDC00 || lo > 0xDFFF) fail("a high surrogate without its low half");
    return 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
  }
  std::string_view s_;
  size_t at_ = 0;
};

}  // namespace

std::vector<ChatMessage> parse_chat_messages(std::string_view json) {
  Reader r(json);
  r.expect('[', "an array of messages, [{\"role\": ..., \"content\": ...}, ...]");
  std::vector<ChatMessage> messages;
  if (!r.take(']')) {
    do {
      if (messages.size() == kMaxChatMessages)
        throw Error(ErrorCode::OutOfRange, "a chat may have at most " + std::to_string(kMaxChatMessages) + " messages");
      const std::string n = "message " + std::to_string(messages.size() + 1);
      r.expect('{', (n + " to be an object").c_str());
      ChatMessage m;
      bool has_role = false, has_content = false;
      if (!r.take('}')) {
        do {
          const std::string key = r.string((n + ": a member name").c_str());
          r.expect(':', "':' after a member name");
          if (key == "role" && !has_role) {
            m.role = r.string((n + ": role").c_str());
            has_role = true;
          } else if (key == "content" && !has_content) {
            m.content = r.string((n + ": content").c_str());
            has_content = true;
          } else if (key == "role" || key == "content") {
            r.fail(n + ": \"" + key + "\" appears twice");
          } else {
            r.fail(n + ": unknown member \"" + key + "\" (a message has exactly role and content)");
          }
        } while (r.take(','));
        r.expect('}', "',' or '}' in a message");
      }
      if (!has_role || !has_content) r.fail(n + ": a message needs both \"role\" and \"content\"");
      messages.push_back(std::move(m));
    } while (r.take(','));
    r.expect(']', "',' or ']' after a message");
  }
  if (!r.at_end()) r.fail("text after the array");
  return messages;
}

}  // namespace kvg
