// The tokenizers a GGUF vocabulary names in tokenizer.ggml.model:
// SentencePiece-style "llama" (tokenizer_encode.cpp) and byte-level BPE
// "gpt2" (tokenizer_bpe.cpp), built from GGUF metadata.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/progress.hpp"

namespace kvg::gguf { class File; }

namespace kvg {

class PreTokenizer;

// tokenizer.ggml.model: "llama" (SentencePiece BPE over characters, scores
// decide merges) or "gpt2" (byte-level BPE, the merges list decides).
enum class TokenizerModel { Spm, Bpe };

// Token types as GGUF stores them in tokenizer.ggml.token_type.
enum class TokenType : int32_t { Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

struct Vocabulary {
  TokenizerModel model = TokenizerModel::Spm;
  std::vector<std::string> pieces;  // id -> piece text (SPM: spaces as U+2581; BPE: bytes as GPT-2's unicode)
  std::vector<float> scores;        // id -> merge priority (higher merges first)
  std::vector<TokenType> types;     // id -> type
  int32_t bos = 1, eos = 2, unk = 0;
  bool add_bos = true;              // tokenizer.ggml.add_bos_token (default true for llama)
  bool add_eos = false;             // tokenizer.ggml.add_eos_token
  bool add_space_prefix = true;     // tokenizer.ggml.add_space_prefix (default true; SPM only)
  // BPE only: tokenizer.ggml.merges ("left right", earlier merges first) and
  // tokenizer.ggml.pre (which pre-tokenizer regexes split the text).
  std::vector<std::string> merges;
  std::string pre = "default";
  // End of a turn besides EOS (tokenizer.ggml.eot_token_id, eom_token_id:
  // Llama 3's <|eot_id|> and <|eom_id|>); -1 when the file names none.
  int32_t eot = -1, eom = -1;
  // tokenizer.chat_template: how the model's instruct tuning laid out a
  // conversation (engine/chat_template.hpp); empty when the file has none.
  std::string chat_template;
};

class Tokenizer {
 public:
  explicit Tokenizer(Vocabulary vocab);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  // Reads tokenizer.ggml.* from a model or vocabulary-only GGUF. Throws kvg::Error.
  static Tokenizer from_gguf(const gguf::File& file);

  // Text -> ids, without BOS (prepend bos() yourself, or use encode_with_bos).
  // Control tokens' text ("<|endoftext|>", "</s>") is matched as that token
  // only when parse_special is true; otherwise it is ordinary text.
  // User-defined tokens are always matched whole.
  // Every encode_* calls `check` every few thousand steps, so a caller can
  // stop a long encoding (it throws; the tokenizer holds no state).
  std::vector<int32_t> encode(std::string_view text, bool parse_special = false,
                              const ProgressCheck& check = {}) const;
  // A prompt as the vocabulary asks for it: BOS first when add_bos, EOS last
  // when add_eos (both from the GGUF).
  std::vector<int32_t> encode_prompt(std::string_view text, bool parse_special = false,
                                     const ProgressCheck& check = {}) const;
  std::vector<int32_t> encode_with_bos(std::string_view text, const ProgressCheck& check = {}) const;
  // Text that continues earlier tokens (after an artifact's prefix): encoded
  // without the space prefix, so " and" stays one leading space.
  std::vector<int32_t> encode_continuation(std::string_view text, const ProgressCheck& check = {}) const;
  // One token's text as it appears in decoded output (byte tokens give their byte,
  // control tokens give ""). `previous` lets the leading-space rule apply: the
  // first piece after BOS drops the space that add_space_prefix inserted.
  std::string decode_piece(int32_t id, int32_t previous) const;
  std::string decode(const std::vector<int32_t>& ids) const;

  int32_t bos() const { return vocab_.bos; }
  int32_t eos() const { return vocab_.eos; }
  // Generation ends at any of these: EOS, and the end-of-turn tokens when the
  // vocabulary names them.
  bool is_end_of_generation(int32_t id) const { return id == vocab_.eos || id == vocab_.eot || id == vocab_.eom; }
  // The id of the control, user-defined or unknown token whose text is
  // exactly `piece` ("<|im_end|>"), or -1: how a chat layout's markers
  // become their special tokens.
  int32_t special_id(std::string_view piece) const;
  const std::string& chat_template() const { return vocab_.chat_template; }
  bool add_bos() const { return vocab_.add_bos; }
  bool add_eos() const { return vocab_.add_eos; }
  TokenizerModel model() const { return vocab_.model; }
  size_t size() const { return vocab_.pieces.size(); }
  // The most bytes of text one token can stand for: the longest piece that
  // text can match, and at least 4 (a character with no piece of its own
  // becomes byte tokens or one unknown token). Text of more than
  // max_text_bytes_per_token() * n bytes never encodes to n tokens or fewer.
  size_t max_text_bytes_per_token() const { return std::max({max_piece_bytes_, max_special_bytes_, size_t{4}}); }
  const Vocabulary& vocabulary() const { return vocab_; }

 private:
  std::vector<int32_t> encode_text(std::string_view text, bool space_prefix, const ProgressCheck& check) const;
  // Splits text at special tokens (control/unknown ones only when
  // parse_special) and encodes the rest with encode_raw.
  std::vector<int32_t> encode_special(std::string_view text, bool parse_special, bool space_prefix,
                                      const ProgressCheck& check) const;
  void encode_raw(std::string_view text, bool space_prefix, std::vector<int32_t>& out,
                  const ProgressCheck& check) const;
  // Byte-level BPE (tokenizer_bpe.cpp).
  void init_bpe();
  void encode_bpe(std::string_view text, std::vector<int32_t>& out, const ProgressCheck& check) const;
  void bpe_word(std::string_view word, std::vector<int32_t>& out) const;
  std::string decode_bpe_piece(int32_t id) const;
  // Lets the merge loop look up a std::string_view without building a string.
  struct PieceHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };

  // Id of a piece that encoding may produce (normal, user-defined, unused), or -1.
  int32_t find_piece(std::string_view piece) const;

  Vocabulary vocab_;
  // Only the pieces SentencePiece lets the merge loop form: control, unknown
  // and byte pieces are reachable by id only, never by matching text.
  std::unordered_map<std::string, int32_t, PieceHash, std::equal_to<>> piece_to_id_;
  size_t max_piece_bytes_ = 0;        // longer concatenations cannot be pieces
  size_t max_special_bytes_ = 0;      // the longest control/unknown/user-defined piece
  std::vector<int32_t> user_defined_;  // matched whole in the text, longest first
  bool has_byte_tokens_ = false;
  int32_t byte_token_[256];  // id of <0xNN>, or -1 when the vocabulary has none
  // Control, unknown and user-defined tokens, longest first: the pieces
  // encode_special looks for in the text.
  std::vector<int32_t> specials_;
  // BPE: the pre-tokenizer, merge ranks keyed "left right", and GPT-2's
  // byte <-> unicode character mapping (UTF-8 per byte; byte per code point).
  std::unique_ptr<PreTokenizer> pre_;
  std::unordered_map<std::string, int32_t, PieceHash, std::equal_to<>> bpe_ranks_;
  std::string byte_unicode_[256];
  std::vector<int16_t> unicode_byte_;  // code point -> byte, -1 where none
};

}  // namespace kvg
