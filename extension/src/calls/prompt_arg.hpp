// A prompt or continuation argument of an engine function, as text or as
// token ids (integer[]): the same SQL function takes either (docs/sql.md,
// "Text or tokens").
//
// Text after an artifact is tokenized on its own, as the continuation of the
// chain's tokens (engine/prompt.hpp). That is not always what tokenizing the
// whole text at once gives: a tokenizer's merges and SentencePiece's space
// prefix depend on what comes before. Token ids say exactly which tokens
// follow the artifact (kvg_tokenize shows a text's), so a continuation is
// token-level whenever its caller needs it to be.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/model.hpp"
#include "extension/src/pg/postgres.hpp"

namespace kvg::pg {

class PromptArg {
 public:
  // NULL, blank text and an empty array are blank.
  static bool blank(FunctionCallInfo fcinfo, int n);

  // Argument n, bounded before it is read (54000 past the context length);
  // token ids must be in the model's vocabulary, one-dimensional, without
  // NULLs (22023 naming the first that is not).
  PromptArg(FunctionCallInfo fcinfo, int n, const Model& model, const char* name);

  // With nothing before it: text gets BOS (when the model adds one); token
  // ids are the whole prompt as given.
  std::vector<int32_t> fresh(const Model& model) const;
  // After the chain's tokens: text as their continuation, token ids as given.
  std::vector<int32_t> after(const Model& model, const std::vector<int32_t>& chain) const;
  // The audit's input_sha256: of the text's bytes, or of the token ids
  // (int32 little-endian, as prompt_tokens_sha256).
  std::string sha256() const;

 private:
  std::optional<std::string> text_;
  std::vector<int32_t> ids_;
};

}  // namespace kvg::pg
