// Text -> ids: SentencePiece's BPE segmentation, as llama.cpp's SPM tokenizer
// and the sentencepiece library apply it to a "llama" vocabulary.
//
// The text is normalised (spaces become U+2581, one more in front when
// add_space_prefix), split into UTF-8 characters, and then the adjacent pair
// whose concatenation is a piece with the highest score is merged, ties going
// to the leftmost pair, until no pair forms a piece. Candidate pairs sit in a
// priority queue; entries made stale by an earlier merge are skipped when
// popped, so a text of n characters costs O(n log n), not the O(n^2) of
// rescanning for the best pair after every merge.
#include <cstdint>
#include <limits>
#include <queue>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/tokenizer.hpp"
#include "engine/tokenizer_pieces.hpp"

namespace kvg {

namespace {

// Length of the UTF-8 character starting at s[i]. A byte that does not start
// a well-formed sequence counts as a character of its own: it cannot be part
// of any piece, so it falls back to its byte token and still round-trips,
// without swallowing the valid characters after it.
size_t utf8_char_len(std::string_view s, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = at(i);
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c < 0x80) return 1;
  else if (c >= 0xC2 && c <= 0xDF) len = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // UTF-16 surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // beyond U+10FFFF
  } else {
    return 1;
  }
  if (i + len > s.size()) return 1;
  if (at(i + 1) < lo || at(i + 1) > hi) return 1;
  for (size_t k = 2; k < len; ++k)
    if (at(i + k) < 0x80 || at(i + k) > 0xBF) return 1;
  return len;
}

// SentencePiece's "identity" normaliser as Llama uses it: whitespace is kept
// as is (no collapsing), only ' ' is escaped.
std::string normalize(std::string_view text, bool add_space_prefix) {
  std::string out;
  out.reserve(text.size() + kSpaceSymbol.size());
  if (add_space_prefix) out += kSpaceSymbol;
  for (const char c : text) {
    if (c == ' ') out += kSpaceSymbol;
    else out += c;
  }
  return out;
}

// A run of the normalised text. Symbols form a doubly linked list in text
// order; a merge grows the left symbol and empties the right one.
struct Symbol {
  uint32_t begin, len;
  int32_t prev, next;
  int32_t node;  // how this symbol was built (see Node)
  bool frozen;   // a user-defined piece: never merged with a neighbour
};

// Merge history: SentencePiece never emits an "unused" piece, it splits one
// back into the two symbols it was merged from, so each merge remembers them.
struct Node {
  uint32_t begin, len;
  int32_t left, right;  // -1 for a starting character
};

struct Bigram {
  float score;
  int32_t left, right;
  uint32_t len;  // combined length when queued; a mismatch marks the entry stale
};

// Highest score on top; between equal scores the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special, const ProgressCheck& check) const {
  return encode_special(text, parse_special, vocab_.add_space_prefix, check);
}

std::vector<int32_t> Tokenizer::encode_continuation(std::string_view text, const ProgressCheck& check) const {
  return encode_special(text, false, false, check);
}

void Tokenizer::encode_raw(std::string_view text, bool space_prefix, std::vector<int32_t>& out,
                           const ProgressCheck& check) const {
  if (vocab_.model == TokenizerModel::Bpe) {
    encode_bpe(text, out, check);
    return;
  }
  const std::vector<int32_t> ids = encode_text(text, space_prefix, check);
  out.insert(out.end(), ids.begin(), ids.end());
}

// As llama.cpp partitions text: each special token, longest first, splits
// every stretch of plain text where it occurs; what is left is encoded
// piece by piece. SentencePiece finds its user-defined pieces during the
// merge itself (encode_text), so here it only looks for control tokens.
// After a special token, the next stretch gets the space prefix again.
std::vector<int32_t> Tokenizer::encode_special(std::string_view text, bool parse_special, bool space_prefix,
                                               const ProgressCheck& check) const {
  const bool bpe = vocab_.model == TokenizerModel::Bpe;
  if (!bpe && !parse_special) return encode_text(text, space_prefix, check);
  struct Fragment {
    std::string_view text;  // plain text, or empty for a token
    int32_t id;             // -1 for plain text
  };
  std::vector<Fragment> fragments{{text, -1}}, next;
  for (const int32_t id : specials_) {
    const TokenType type = vocab_.types[id];
    if (type == TokenType::UserDefined ? !bpe : !parse_special) continue;
    const std::string_view piece = vocab_.pieces[id];
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.id >= 0) {
        next.push_back(f);
        continue;
      }
      size_t pos = 0;
      for (size_t hit; (hit = f.text.find(piece, pos)) != std::string_view::npos; pos = hit + piece.size()) {
        if (hit > pos) next.push_back({f.text.substr(pos, hit - pos), -1});
        next.push_back({{}, id});
      }
      if (pos < f.text.size()) next.push_back({f.text.substr(pos), -1});
    }
    fragments.swap(next);
  }
  std::vector<int32_t> ids;
  bool prefix = space_prefix;
  for (const Fragment& f : fragments) {
    if (f.id >= 0) {
      ids.push_back(f.id);
      prefix = space_prefix;
    } else {
      encode_raw(f.text, prefix, ids, check);
      prefix = false;
    }
  }
  return ids;
}

std::vector<int32_t> Tokenizer::encode_text(std::string_view text, bool space_prefix,
                                            const ProgressCheck& check) const {
  if (text.empty()) return {};
  PollEvery poll(check, 4096);
  const std::string norm = normalize(text, space_prefix);
  if (norm.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    throw Error(ErrorCode::OutOfRange, "tokenizer: text of " + std::to_string(text.size()) +
                                           " bytes is too long to encode at once");
  const std::string_view view = norm;

  std::vector<Symbol> symbols;
  std::vector<Node> nodes;
  symbols.reserve(norm.size());
  nodes.reserve(norm.size() * 2);
  for (size_t pos = 0; pos < norm.size();) {
    poll.step();
    size_t len = 0;
    bool frozen = false;
    for (const int32_t id : user_defined_) {
      const std::string& piece = vocab_.pieces[id];
      if (view.substr(pos, piece.size()) == piece) {
        len = piece.size();
        frozen = true;
        break;
      }
    }
    if (len == 0) len = utf8_char_len(view, pos);
    const auto index = static_cast<int32_t>(symbols.size());
    nodes.push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(len), -1, -1});
    symbols.push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(len), index - 1, index + 1,
                       index, frozen});
    pos += len;
  }
  symbols.back().next = -1;

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  const auto try_pair = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    if (l.frozen || r.frozen) return;
    const size_t len = size_t{l.len} + r.len;
    if (len > max_piece_bytes_) return;  // cheap reject: no piece is that long
    const int32_t id = find_piece(view.substr(l.begin, len));
    if (id < 0) return;
    queue.push({vocab_.scores[id], left, right, static_cast<uint32_t>(len)});
  };
  for (size_t i = 1; i < symbols.size(); ++i) try_pair(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));

  while (!queue.empty()) {
    poll.step();
    const Bigram top = queue.top();
    queue.pop();
    Symbol& l = symbols[top.left];
    Symbol& r = symbols[top.right];
    // Stale: one side was merged away or grew since this pair was queued.
    if (l.len == 0 || r.len == 0 || l.next != top.right || l.len + r.len != top.len) continue;
    nodes.push_back({l.begin, top.len, l.node, r.node});
    l.node = static_cast<int32_t>(nodes.size() - 1);
    l.len = top.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = top.left;
    try_pair(l.prev, top.left);
    try_pair(top.left, l.next);
  }

  std::vector<int32_t> ids;
  ids.reserve(symbols.size());
  std::vector<int32_t> pending;  // nodes still to emit, innermost last
  for (int32_t s = 0; s >= 0; s = symbols[s].next) {
    pending.push_back(symbols[s].node);
    while (!pending.empty()) {
      const Node node = nodes[pending.back()];
      pending.pop_back();
      const std::string_view piece = view.substr(node.begin, node.len);
      const int32_t id = find_piece(piece);
      if (id >= 0 && vocab_.types[id] == TokenType::Unused && node.left >= 0) {
        pending.push_back(node.right);  // left is emitted first
        pending.push_back(node.left);
      } else if (id >= 0) {
        ids.push_back(id);
      } else if (has_byte_tokens_) {
        for (const char c : piece) {
          const int32_t byte_id = byte_token_[static_cast<unsigned char>(c)];
          ids.push_back(byte_id >= 0 ? byte_id : vocab_.unk);
        }
      } else if (ids.empty() || ids.back() != vocab_.unk) {
        // Without byte fallback, SentencePiece collapses a run of unknown
        // characters into one <unk>.
        ids.push_back(vocab_.unk);
      }
    }
  }
  return ids;
}

}  // namespace kvg
