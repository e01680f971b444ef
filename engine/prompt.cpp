#include "engine/prompt.hpp"

namespace kvg {

std::vector<int32_t> fresh_prompt(const Model& model, std::string_view text) {
  const Tokenizer& tok = model.tokenizer();
  return tok.add_bos() ? tok.encode_with_bos(text) : tok.encode(text);
}

std::vector<int32_t> chain_tokens(const Digest& leaf, const ArtifactOpener& open) {
  std::vector<int32_t> tokens;
  for (const ArtifactHeader& h : chain_headers(leaf, open)) tokens.insert(tokens.end(), h.tokens.begin(), h.tokens.end());
  return tokens;
}

std::vector<int32_t> prompt_after_chain(const Model& model, const std::vector<int32_t>& chain, std::string_view text) {
  std::vector<int32_t> prompt = chain;
  const std::vector<int32_t> rest = model.tokenizer().encode_continuation(text);
  prompt.insert(prompt.end(), rest.begin(), rest.end());
  return prompt;
}

}  // namespace kvg
