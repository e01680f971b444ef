#include "engine/prompt.hpp"

#include <string>

#include "common/error.hpp"

namespace kvg {

size_t max_prompt_bytes(const Model& model) {
  return size_t(model.config().n_ctx) * model.tokenizer().max_text_bytes_per_token();
}

void check_prompt_bytes(const Model& model, size_t bytes, const char* what) {
  const size_t limit = max_prompt_bytes(model);
  if (bytes > limit)
    throw Error(ErrorCode::OutOfRange,
                std::string(what) + " of " + std::to_string(bytes) + " bytes cannot fit in the context length " +
                    std::to_string(model.config().n_ctx) + " (at most " + std::to_string(limit) +
                    " bytes: no token of this model stands for more than " +
                    std::to_string(model.tokenizer().max_text_bytes_per_token()) + ")");
}

void check_prompt_tokens(const Model& model, size_t n_tokens) {
  if (n_tokens > size_t(model.config().n_ctx))
    throw Error(ErrorCode::OutOfRange, "prompt of " + std::to_string(n_tokens) +
                                           " tokens exceeds the context length " +
                                           std::to_string(model.config().n_ctx));
}

std::vector<int32_t> fresh_prompt(const Model& model, std::string_view text, const ProgressCheck& check) {
  check_prompt_bytes(model, text.size(), "prompt");
  const Tokenizer& tok = model.tokenizer();
  std::vector<int32_t> prompt = tok.add_bos() ? tok.encode_with_bos(text, check) : tok.encode(text, false, check);
  check_prompt_tokens(model, prompt.size());
  return prompt;
}

std::vector<int32_t> chain_tokens(const Digest& leaf, const ArtifactOpener& open) {
  std::vector<int32_t> tokens;
  for (const ArtifactHeader& h : chain_headers(leaf, open)) tokens.insert(tokens.end(), h.tokens.begin(), h.tokens.end());
  return tokens;
}

std::vector<int32_t> prompt_after_chain(const Model& model, const std::vector<int32_t>& chain, std::string_view text,
                                        const ProgressCheck& check) {
  check_prompt_bytes(model, text.size(), "prompt");
  std::vector<int32_t> prompt = chain;
  const std::vector<int32_t> rest = model.tokenizer().encode_continuation(text, check);
  prompt.insert(prompt.end(), rest.begin(), rest.end());
  check_prompt_tokens(model, prompt.size());
  return prompt;
}

}  // namespace kvg
