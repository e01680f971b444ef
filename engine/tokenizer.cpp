// Vocabulary validation and decoding. Encoding lives in tokenizer_encode.cpp
// (SentencePiece) and tokenizer_bpe.cpp (byte-level BPE), reading GGUF in
// tokenizer_gguf.cpp.
#include "engine/tokenizer.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.hpp"
#include "engine/pretokenizer.hpp"
#include "engine/tokenizer_pieces.hpp"

namespace kvg {

namespace {

std::string describe_id(const char* what, int32_t id, size_t n) {
  return std::string("tokenizer: ") + what + " id " + std::to_string(id) + " is outside the vocabulary of " +
         std::to_string(n) + " pieces";
}

bool known_type(TokenType t) {
  const auto v = static_cast<int32_t>(t);
  return v >= static_cast<int32_t>(TokenType::Undefined) && v <= static_cast<int32_t>(TokenType::Byte);
}

// Types whose text the merge loop may form (SentencePiece keeps these in its
// piece table; control, unknown and byte pieces are kept apart, by id only).
bool mergeable(TokenType t) {
  return t == TokenType::Normal || t == TokenType::Undefined || t == TokenType::UserDefined ||
         t == TokenType::Unused;
}

}  // namespace

Tokenizer::Tokenizer(Vocabulary vocab) : vocab_(std::move(vocab)) {
  const size_t n = vocab_.pieces.size();
  if (n == 0) throw Error(ErrorCode::InvalidArgument, "tokenizer: the vocabulary is empty");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    throw Error(ErrorCode::InvalidArgument, "tokenizer: more pieces than 32-bit ids can address");
  if (vocab_.scores.empty()) vocab_.scores.assign(n, 0.0f);
  if (vocab_.types.empty()) vocab_.types.assign(n, TokenType::Normal);
  if (vocab_.scores.size() != n)
    throw Error(ErrorCode::InvalidArgument, "tokenizer: " + std::to_string(n) + " pieces but " +
                                                std::to_string(vocab_.scores.size()) + " scores");
  if (vocab_.types.size() != n)
    throw Error(ErrorCode::InvalidArgument, "tokenizer: " + std::to_string(n) + " pieces but " +
                                                std::to_string(vocab_.types.size()) + " token types");
  const auto in_range = [n](int32_t id) { return id >= 0 && static_cast<size_t>(id) < n; };
  if (!in_range(vocab_.bos)) throw Error(ErrorCode::InvalidArgument, describe_id("bos", vocab_.bos, n));
  if (!in_range(vocab_.eos)) throw Error(ErrorCode::InvalidArgument, describe_id("eos", vocab_.eos, n));
  if (!in_range(vocab_.unk)) throw Error(ErrorCode::InvalidArgument, describe_id("unknown", vocab_.unk, n));
  if (vocab_.eot != -1 && !in_range(vocab_.eot))
    throw Error(ErrorCode::InvalidArgument, describe_id("eot", vocab_.eot, n));
  if (vocab_.eom != -1 && !in_range(vocab_.eom))
    throw Error(ErrorCode::InvalidArgument, describe_id("eom", vocab_.eom, n));

  std::fill(std::begin(byte_token_), std::end(byte_token_), -1);
  piece_to_id_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<int32_t>(i);
    const std::string& piece = vocab_.pieces[i];
    const TokenType type = vocab_.types[i];
    if (!known_type(type))
      throw Error(ErrorCode::InvalidArgument, "tokenizer: token " + std::to_string(i) + " has unknown type " +
                                                  std::to_string(static_cast<int32_t>(type)));
    // A NaN score would break the strict ordering the merge queue relies on.
    if (std::isnan(vocab_.scores[i]))
      throw Error(ErrorCode::InvalidArgument, "tokenizer: token " + std::to_string(i) + " has a NaN score");
    if ((type == TokenType::Control || type == TokenType::Unknown || type == TokenType::UserDefined) &&
        !piece.empty()) {
      specials_.push_back(id);
      max_special_bytes_ = std::max(max_special_bytes_, piece.size());
    }
    if (vocab_.model == TokenizerModel::Bpe) {
      // Merges only ever form the model's own pieces. Control and
      // user-defined tokens are found whole by encode_special; letting the
      // merge loop reach them would make one id stand for two texts
      // (DeepSeek Coder adds "ý" as a token: it is the text "ý", never the
      // byte 0xFD that GPT-2's table also spells "ý").
      if (mergeable(type) && type != TokenType::UserDefined && piece_to_id_.emplace(piece, id).second)
        max_piece_bytes_ = std::max(max_piece_bytes_, piece.size());
      continue;
    }
    if (type == TokenType::Byte) {
      const int byte = parse_byte_piece(piece);
      if (byte < 0)
        throw Error(ErrorCode::InvalidArgument, "tokenizer: byte token " + std::to_string(i) + " has piece '" +
                                                    piece + "', expected <0xNN>");
      if (byte_token_[byte] < 0) byte_token_[byte] = id;  // duplicates: the first id wins
      has_byte_tokens_ = true;
      continue;
    }
    // An empty piece can never be formed from text; it stays decodable by id.
    if (!mergeable(type) || piece.empty()) continue;
    // Duplicates: the first id keeps the piece, as the lowest id is the one
    // SentencePiece itself would have assigned; later copies decode only.
    if (!piece_to_id_.emplace(piece, id).second) continue;
    max_piece_bytes_ = std::max(max_piece_bytes_, piece.size());
    if (type == TokenType::UserDefined) user_defined_.push_back(id);
  }
  // Longest first, so that at each position the longest user-defined match wins.
  std::stable_sort(user_defined_.begin(), user_defined_.end(), [this](int32_t a, int32_t b) {
    return vocab_.pieces[a].size() > vocab_.pieces[b].size();
  });
  std::stable_sort(specials_.begin(), specials_.end(), [this](int32_t a, int32_t b) {
    return vocab_.pieces[a].size() > vocab_.pieces[b].size();
  });
  if (vocab_.model == TokenizerModel::Bpe) init_bpe();
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;

std::vector<int32_t> Tokenizer::encode_prompt(std::string_view text, bool parse_special,
                                              const ProgressCheck& check) const {
  std::vector<int32_t> ids;
  if (vocab_.add_bos) ids.push_back(vocab_.bos);
  const std::vector<int32_t> body = encode(text, parse_special, check);
  ids.insert(ids.end(), body.begin(), body.end());
  if (vocab_.add_eos) ids.push_back(vocab_.eos);
  return ids;
}

int32_t Tokenizer::special_id(std::string_view piece) const {
  for (const int32_t id : specials_)
    if (vocab_.pieces[size_t(id)] == piece) return id;
  return -1;
}

int32_t Tokenizer::find_piece(std::string_view piece) const {
  const auto it = piece_to_id_.find(piece);
  return it == piece_to_id_.end() ? -1 : it->second;
}

std::vector<int32_t> Tokenizer::encode_with_bos(std::string_view text, const ProgressCheck& check) const {
  std::vector<int32_t> ids = encode(text, false, check);
  ids.insert(ids.begin(), vocab_.bos);
  return ids;
}

std::string Tokenizer::decode_piece(int32_t id, int32_t previous) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_.pieces.size())
    throw Error(ErrorCode::OutOfRange, describe_id("token", id, vocab_.pieces.size()));
  if (vocab_.model == TokenizerModel::Bpe) return decode_bpe_piece(id);
  const std::string& piece = vocab_.pieces[id];
  switch (vocab_.types[id]) {
    case TokenType::Control:
      return "";
    case TokenType::Unknown:
      // SentencePiece's surface for <unk>: visible, and never mistaken for input text.
      return std::string(kUnknownSurface);
    case TokenType::Byte:
      return std::string(1, static_cast<char>(parse_byte_piece(piece)));
    default:
      break;
  }
  std::string text = unescape_spaces(piece);
  // The space that add_space_prefix put in front of the text is not part of it.
  const bool at_start = previous < 0 || previous == vocab_.bos;
  if (vocab_.add_space_prefix && at_start && !text.empty() && text.front() == ' ') text.erase(0, 1);
  return text;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string text;
  // Control tokens are invisible, so they do not end the "start of text":
  // [<s>, "▁Hello"] and ["▁Hello"] both decode to "Hello". Once any other
  // token has been seen, later spaces are real. Byte tokens are appended raw;
  // consecutive ones reassemble a multi-byte UTF-8 character by themselves.
  int32_t previous = -1;
  for (const int32_t id : ids) {
    text += decode_piece(id, previous);
    if (vocab_.types[id] != TokenType::Control) previous = id;
  }
  return text;
}

}  // namespace kvg
