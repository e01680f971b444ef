#include "engine/prompt.hpp"

#include <string>

#include "common/error.hpp"

namespace kvg {

namespace {
int64_t reach(const Model& model, int64_t context) { return context > 0 ? context : model.config().n_ctx; }
}  // namespace

size_t max_prompt_bytes(const Model& model, int64_t context) {
  return size_t(reach(model, context)) * model.tokenizer().max_text_bytes_per_token();
}

void check_prompt_bytes(const Model& model, size_t bytes, const char* what, int64_t context) {
  const size_t limit = max_prompt_bytes(model, context);
  if (bytes > limit)
    throw Error(ErrorCode::OutOfRange,
                std::string(what) + " of " + std::to_string(bytes) + " bytes cannot fit in the context length " +
                    std::to_string(reach(model, context)) + " (at most " + std::to_string(limit) +
                    " bytes: no token of this model stands for more than " +
                    std::to_string(model.tokenizer().max_text_bytes_per_token()) + ")");
}

void check_prompt_tokens(const Model& model, size_t n_tokens, int64_t context) {
  if (n_tokens > size_t(reach(model, context)))
    throw Error(ErrorCode::OutOfRange, "prompt of " + std::to_string(n_tokens) +
                                           " tokens exceeds the context length " +
                                           std::to_string(reach(model, context)));
}

std::vector<int32_t> fresh_prompt(const Model& model, std::string_view text, const ProgressCheck& check,
                                  int64_t context) {
  check_prompt_bytes(model, text.size(), "prompt", context);
  const Tokenizer& tok = model.tokenizer();
  std::vector<int32_t> prompt = tok.add_bos() ? tok.encode_with_bos(text, check) : tok.encode(text, false, check);
  check_prompt_tokens(model, prompt.size(), context);
  return prompt;
}

std::vector<int32_t> chain_tokens(const Digest& leaf, const ArtifactOpener& open) {
  std::vector<int32_t> tokens;
  for (const ArtifactHeader& h : chain_headers(leaf, open)) tokens.insert(tokens.end(), h.tokens.begin(), h.tokens.end());
  return tokens;
}

std::vector<int32_t> prompt_after_chain(const Model& model, const std::vector<int32_t>& chain, std::string_view text,
                                        const ProgressCheck& check, int64_t context) {
  check_prompt_bytes(model, text.size(), "prompt", context);
  std::vector<int32_t> prompt = chain;
  const std::vector<int32_t> rest = model.tokenizer().encode_continuation(text, check);
  prompt.insert(prompt.end(), rest.begin(), rest.end());
  check_prompt_tokens(model, prompt.size(), context);
  return prompt;
}

}  // namespace kvg
