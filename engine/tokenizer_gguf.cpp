// Builds the tokenizer from a GGUF file's tokenizer.ggml.* metadata alone:
// no architecture key is read, so a vocabulary-only file of any family loads.
#include <algorithm>
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
constexpr const char* kMergesKey = "tokenizer.ggml.merges";
constexpr const char* kPreKey = "tokenizer.ggml.pre";

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
  Vocabulary v;
  if (*model == "llama") v.model = TokenizerModel::Spm;
  else if (*model == "gpt2") v.model = TokenizerModel::Bpe;
  else
    throw Error(ErrorCode::Unsupported, file.path() + ": " + kModelKey + " is \"" + *model +
                                            "\", a tokenizer this engine does not implement (implemented: \"llama\" "
                                            "SentencePiece, \"gpt2\" byte-level BPE)");
  const bool bpe = v.model == TokenizerModel::Bpe;
  // A missing pre-tokenizer means "default", as llama.cpp reads it. For
  // SentencePiece no pre-tokenizer applies, so anything else is refused.
  v.pre = file.opt_string(kPreKey).value_or("default");
  if (!bpe && v.pre != "default")
    throw Error(ErrorCode::Unsupported, file.path() + ": " + kPreKey + " = \"" + v.pre +
                                            "\" with the SentencePiece tokenizer is not implemented");
  if (bpe) {
    for (const std::string_view m : file.get_string_array(kMergesKey)) v.merges.emplace_back(m);
  }
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

  // Defaults as llama.cpp has them: SentencePiece <unk> <s> </s> = 0 1 2;
  // GPT-2 style vocabularies end text with id 11 unless they say otherwise
  // (BPE never produces <unk>; 0 only keeps the field in range).
  v.bos = read_id(file, "tokenizer.ggml.bos_token_id", bpe ? std::min<int32_t>(11, int32_t(n - 1)) : 1, n);
  v.eos = read_id(file, "tokenizer.ggml.eos_token_id", bpe ? std::min<int32_t>(11, int32_t(n - 1)) : 2, n);
  v.unk = read_id(file, "tokenizer.ggml.unknown_token_id", 0, n);
  v.eot = read_id(file, "tokenizer.ggml.eot_token_id", -1, n);
  v.eom = read_id(file, "tokenizer.ggml.eom_token_id", -1, n);
  v.chat_template = file.opt_string("tokenizer.chat_template").value_or("");
  const bool llama3 = v.pre == "llama-bpe" || v.pre == "llama3" || v.pre == "llama-v3";
  v.add_bos = file.opt_bool("tokenizer.ggml.add_bos_token").value_or(!bpe || llama3);
  v.add_eos = file.opt_bool("tokenizer.ggml.add_eos_token").value_or(false);
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
  } else if (bpe) {
    v.types.assign(n, TokenType::Normal);
    v.types[v.bos] = TokenType::Control;
    v.types[v.eos] = TokenType::Control;
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
