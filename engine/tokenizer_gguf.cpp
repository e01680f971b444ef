// Builds the tokenizer from a GGUF file's tokenizer.ggml.* metadata.
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/gguf/gguf_file.hpp"
#include "engine/tokenizer.hpp"
#include "engine/tokenizer_pieces.hpp"

namespace kvg {

namespace {

constexpr const char* kModelKey = "tokenizer.ggml.model";
constexpr const char* kTokensKey = "tokenizer.ggml.tokens";
constexpr const char* kScoresKey = "tokenizer.ggml.scores";
constexpr const char* kTypesKey = "tokenizer.ggml.token_type";

Error corrupt(const gguf::File& file, const std::string& what) {
  return Error(ErrorCode::Corrupt, file.path() + ": " + what);
}

int32_t read_id(const gguf::File& file, const char* key, int32_t fallback, size_t n) {
  const std::optional<uint64_t> value = file.opt_uint(key);
  if (!value) return fallback;
  if (*value >= n)
    throw corrupt(file, std::string(key) + " = " + std::to_string(*value) + " is outside the vocabulary of " +
                            std::to_string(n) + " tokens");
  return static_cast<int32_t>(*value);
}

// Without tokenizer.ggml.token_type every token would be Normal, and "<0x0A>"
// or "<s>" would then decode as literal text. The spelling and the special
// ids say what they are, so use them.
std::vector<TokenType> infer_types(const Vocabulary& v) {
  std::vector<TokenType> types(v.pieces.size(), TokenType::Normal);
  for (size_t i = 0; i < v.pieces.size(); ++i)
    if (parse_byte_piece(v.pieces[i]) >= 0) types[i] = TokenType::Byte;
  types[v.bos] = TokenType::Control;
  types[v.eos] = TokenType::Control;
  types[v.unk] = TokenType::Unknown;
  return types;
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const gguf::File& file) {
  const std::optional<std::string> model = file.opt_string(kModelKey);
  if (!model) throw corrupt(file, std::string("no ") + kModelKey + ": the file carries no tokenizer");
  if (*model != "llama")
    throw Error(ErrorCode::Unsupported, file.path() + ": " + kModelKey + " is \"" + *model +
                                            "\"; only the SentencePiece-style \"llama\" tokenizer is supported");

  Vocabulary v;
  for (const std::string_view piece : file.get_string_array(kTokensKey)) v.pieces.emplace_back(piece);
  const size_t n = v.pieces.size();
  if (n == 0) throw corrupt(file, std::string(kTokensKey) + " is empty");

  if (file.find(kScoresKey)) {
    v.scores = file.get_f32_array(kScoresKey);
    if (v.scores.size() != n)
      throw corrupt(file, std::string(kScoresKey) + " has " + std::to_string(v.scores.size()) + " entries but " +
                              kTokensKey + " has " + std::to_string(n));
  } else {
    v.scores.assign(n, 0.0f);
  }

  v.bos = read_id(file, "tokenizer.ggml.bos_token_id", 1, n);
  v.eos = read_id(file, "tokenizer.ggml.eos_token_id", 2, n);
  v.unk = read_id(file, "tokenizer.ggml.unknown_token_id", 0, n);
  v.add_bos = file.opt_bool("tokenizer.ggml.add_bos_token").value_or(true);
  v.add_space_prefix = file.opt_bool("tokenizer.ggml.add_space_prefix").value_or(true);

  if (file.find(kTypesKey)) {
    const std::vector<int32_t> raw = file.get_i32_array(kTypesKey);
    if (raw.size() != n)
      throw corrupt(file, std::string(kTypesKey) + " has " + std::to_string(raw.size()) + " entries but " +
                              kTokensKey + " has " + std::to_string(n));
    v.types.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      if (raw[i] < static_cast<int32_t>(TokenType::Undefined) || raw[i] > static_cast<int32_t>(TokenType::Byte))
        throw corrupt(file, std::string(kTypesKey) + "[" + std::to_string(i) + "] = " + std::to_string(raw[i]) +
                                " is not a token type");
      v.types.push_back(static_cast<TokenType>(raw[i]));
    }
  } else {
    v.types = infer_types(v);
  }

  // The constructor checks the rest (byte pieces, NaN scores); in a file
  // those are corrupt data rather than a caller's mistake.
  try {
    return Tokenizer(std::move(v));
  } catch (const Error& e) {
    if (e.code() != ErrorCode::InvalidArgument) throw;
    throw corrupt(file, e.what());
  }
}

}  // namespace kvg
