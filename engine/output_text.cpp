#include "engine/output_text.hpp"

#include <cstddef>
#include <cstdint>

namespace kvg {

namespace {

// Length of the well-formed sequence starting at s[i] (1..4), or 0 when the
// bytes at i are ill-formed; `*consumed` is then the maximal subpart's length
// (at least 1). `*incomplete` says the sequence is a valid prefix cut off by
// the end of the input.
size_t scan(std::string_view s, size_t i, size_t* consumed, bool* incomplete) {
  const auto b = [&](size_t k) { return uint8_t(s[k]); };
  const uint8_t c = b(i);
  *incomplete = false;
  *consumed = 1;
  if (c < 0x80) return c == 0 ? 0 : 1;
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;  // range of the second byte (Unicode table 3-7)
  if (c >= 0xC2 && c <= 0xDF) need = 1;
  else if (c == 0xE0) need = 2, lo = 0xA0;
  else if (c >= 0xE1 && c <= 0xEC) need = 2;
  else if (c == 0xED) need = 2, hi = 0x9F;
  else if (c >= 0xEE && c <= 0xEF) need = 2;
  else if (c == 0xF0) need = 3, lo = 0x90;
  else if (c >= 0xF1 && c <= 0xF3) need = 3;
  else if (c == 0xF4) need = 3, hi = 0x8F;
  else return 0;  // 80..C1, F5..FF: never start a character
  for (size_t k = 1; k <= need; ++k) {
    if (i + k >= s.size()) {
      *incomplete = true;
      *consumed = k;
      return 0;
    }
    const uint8_t x = b(i + k);
    const bool ok = k == 1 ? (x >= lo && x <= hi) : (x >= 0x80 && x <= 0xBF);
    if (!ok) {
      *consumed = k;
      return 0;
    }
  }
  return need + 1;
}

// Appends the text of s[0..end) to out; returns where an incomplete trailing
// sequence starts when `hold` is set (s.size() otherwise).
size_t convert(std::string_view s, bool hold, std::string& out) {
  size_t i = 0;
  while (i < s.size()) {
    size_t consumed;
    bool incomplete;
    const size_t n = scan(s, i, &consumed, &incomplete);
    if (n) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    if (incomplete && hold) return i;
    out += kReplacementCharacter;
    i += consumed;
  }
  return i;
}

}  // namespace

std::string output_text(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  convert(bytes, false, out);
  return out;
}

bool is_output_text(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();) {
    size_t consumed;
    bool incomplete;
    const size_t n = scan(bytes, i, &consumed, &incomplete);
    if (!n) return false;
    i += n;
  }
  return true;
}

std::string OutputTextStream::feed(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  const size_t held = convert(pending_, true, out);
  pending_.erase(0, held);
  return out;
}

std::string OutputTextStream::finish() {
  std::string out = output_text(pending_);
  pending_.clear();
  return out;
}

}  // namespace kvg
