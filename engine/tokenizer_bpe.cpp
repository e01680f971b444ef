// Byte-level BPE ("gpt2" vocabularies: GPT-2, Llama 3, Qwen2, StarCoder,
// DeepSeek, Falcon, SmolLM, ...).
//
// Text is split into words by the vocabulary's pre-tokenizer (pretokenizer.cpp);
// each word's bytes are spelled with GPT-2's byte -> unicode table (printable
// bytes stand for themselves, the other 68 become U+0100..U+0143), and then
// the adjacent pair that comes earliest in tokenizer.ggml.merges is merged,
// ties going to the leftmost pair, until no pair is a merge. Every symbol
// left is a token. Decoding maps each character back to its byte, so
// decode(encode(text)) == text for any bytes, valid UTF-8 or not.
#include <cstdint>
#include <limits>
#include <queue>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/pretokenizer.hpp"
#include "engine/tokenizer.hpp"

namespace kvg {

namespace {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

// Length of the UTF-8 sequence led by c (the mapped text is always valid).
size_t lead_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

struct Symbol {
  uint32_t begin, len;
  int32_t prev, next;
};

struct Pair {
  int32_t rank, left, right;
  uint32_t len;  // combined length when queued; a mismatch marks it stale
};

// Lowest rank on top; between equal ranks the leftmost pair.
struct PairOrder {
  bool operator()(const Pair& a, const Pair& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

void Tokenizer::init_bpe() {
  // GPT-2's bytes_to_unicode(): bytes that are printable Latin-1 (other than
  // space and soft hyphen) keep their code point; the rest, in byte order,
  // take 256, 257, ...
  unicode_byte_.assign(0x144, -1);
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool keep = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const uint32_t cp = keep ? uint32_t(b) : next++;
    append_utf8(byte_unicode_[b], cp);
    unicode_byte_[cp] = int16_t(b);
  }
  pre_ = std::make_unique<PreTokenizer>(vocab_.pre);
  if (vocab_.merges.size() > size_t(std::numeric_limits<int32_t>::max()))
    throw Error(ErrorCode::InvalidArgument, "tokenizer: too many merges");
  bpe_ranks_.reserve(vocab_.merges.size());
  for (size_t i = 0; i < vocab_.merges.size(); ++i) {
    const std::string& m = vocab_.merges[i];
    // "left right": the separator is the first space after the first
    // character (a merge's left side is never empty).
    const size_t sep = m.find(' ', 1);
    if (sep == std::string::npos || sep + 1 >= m.size())
      throw Error(ErrorCode::InvalidArgument,
                  "tokenizer: merge " + std::to_string(i) + " '" + m + "' is not two pieces separated by a space");
    bpe_ranks_.emplace(m, int32_t(i));  // duplicates: the earlier rank wins
  }
}

std::string Tokenizer::decode_bpe_piece(int32_t id) const {
  const std::string& piece = vocab_.pieces[id];
  switch (vocab_.types[id]) {
    case TokenType::Control: return "";
    case TokenType::UserDefined: return piece;  // added tokens are stored as their text
    default: break;
  }
  // Each character stands for one byte; a character outside the table (a
  // vocabulary that is not byte-level after all) is kept as its UTF-8 text.
  std::string out;
  out.reserve(piece.size());
  for (size_t i = 0; i < piece.size();) {
    const auto c = static_cast<unsigned char>(piece[i]);
    size_t len = lead_len(c);
    if (i + len > piece.size()) len = 1;
    uint32_t cp = len == 1 ? c : c & (0xFF >> (len + 1));
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(piece[i + k]) & 0x3F);
    if (cp < unicode_byte_.size() && unicode_byte_[cp] >= 0) out += char(unicode_byte_[cp]);
    else out.append(piece, i, len);
    i += len;
  }
  return out;
}

void Tokenizer::encode_bpe(std::string_view text, std::vector<int32_t>& out, const ProgressCheck& check) const {
  PollEvery poll(check, 1024);
  for (const std::string_view word : pre_->split(text)) {
    poll.step();
    bpe_word(word, out);
  }
}

void Tokenizer::bpe_word(std::string_view word, std::vector<int32_t>& out) const {
  std::string mapped;
  mapped.reserve(word.size() * 2);
  for (const char c : word) mapped += byte_unicode_[static_cast<unsigned char>(c)];
  if (pre_->ignore_merges()) {
    if (const auto it = piece_to_id_.find(mapped); it != piece_to_id_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (mapped.size() > size_t(std::numeric_limits<int32_t>::max()))
    throw Error(ErrorCode::OutOfRange, "tokenizer: a word of " + std::to_string(word.size()) + " bytes is too long");
  const std::string_view view = mapped;
  std::vector<Symbol> symbols;
  for (size_t pos = 0; pos < mapped.size();) {
    const size_t len = lead_len(static_cast<unsigned char>(mapped[pos]));
    const auto index = int32_t(symbols.size());
    symbols.push_back({uint32_t(pos), uint32_t(len), index - 1, index + 1});
    pos += len;
  }
  symbols.back().next = -1;

  std::priority_queue<Pair, std::vector<Pair>, PairOrder> queue;
  std::string key;
  const auto try_pair = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    key.assign(view.substr(l.begin, l.len));
    key += ' ';
    key.append(view.substr(r.begin, r.len));
    const auto it = bpe_ranks_.find(key);
    if (it == bpe_ranks_.end()) return;
    queue.push({it->second, left, right, l.len + r.len});
  };
  for (size_t i = 1; i < symbols.size(); ++i) try_pair(int32_t(i - 1), int32_t(i));
  while (!queue.empty()) {
    const Pair top = queue.top();
    queue.pop();
    Symbol& l = symbols[top.left];
    Symbol& r = symbols[top.right];
    if (l.len == 0 || r.len == 0 || l.next != top.right || l.len + r.len != top.len) continue;
    l.len = top.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = top.left;
    try_pair(l.prev, top.left);
    try_pair(top.left, l.next);
  }

  for (int32_t s = 0; s >= 0; s = symbols[s].next) {
    const std::string_view piece = view.substr(symbols[s].begin, symbols[s].len);
    if (const int32_t id = find_piece(piece); id >= 0) {
      out.push_back(id);
      continue;
    }
    // A merge whose result is not in the vocabulary (a damaged file): spell
    // the symbol with one token per byte character, as llama.cpp does. A
    // vocabulary may lack some bytes altogether (Falcon has no token for
    // 0x03 or 0x0B, StarCoder none for 0xF5..0xFF); llama.cpp then drops the byte
    // silently, we refuse the text instead, naming the byte.
    for (size_t i = 0; i < piece.size();) {
      const size_t len = lead_len(static_cast<unsigned char>(piece[i]));
      const int32_t id = find_piece(piece.substr(i, len));
      if (id < 0) {
        uint32_t cp = len == 1 ? uint8_t(piece[i]) : uint8_t(piece[i]) & 0x1F;
        if (len == 2) cp = (cp << 6) | (uint8_t(piece[i + 1]) & 0x3F);
        const int byte = cp < unicode_byte_.size() ? unicode_byte_[cp] : -1;
        static const char* hex = "0123456789ABCDEF";
        throw Error(ErrorCode::InvalidArgument,
                    std::string("tokenizer: the text contains byte 0x") + hex[(byte >> 4) & 15] + hex[byte & 15] +
                        ", for which this vocabulary has no token");
      }
      out.push_back(id);
      i += len;
    }
  }
}

}  // namespace kvg
