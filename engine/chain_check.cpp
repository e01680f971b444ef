#include "engine/chain_check.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace kvg {

namespace {

std::vector<uint32_t> as_u32(std::span<const int32_t> ids) { return {ids.begin(), ids.end()}; }

// Refuses an artifact that this session's model and recipe cannot use.
void check_compatible(const ArtifactHeader& h, const Session& session, const Digest& id) {
  const Model& model = session.model();
  const ModelConfig& c = model.config();
  const std::string what = artifact_label(id);
  if (h.model_fingerprint != model.fingerprint())
    throw Error(ErrorCode::ModelMismatch, what + "was captured with model " + to_hex(h.model_fingerprint) +
                                              ", but the loaded model is " + model.fingerprint_hex());
  const std::string recipe = session.options().recipe.name();
  if (h.recipe != recipe)
    throw Error(ErrorCode::RecipeMismatch,
                what + "was produced under recipe '" + h.recipe + "', this session computes '" + recipe + "'");
  if (h.kv_dtype != uint32_t(session.options().recipe.kv))
    throw Error(ErrorCode::RecipeMismatch, what + "stores its KV as dtype " + std::to_string(h.kv_dtype) +
                                               ", but recipe '" + recipe + "' keeps " +
                                               kv_storage_name(session.options().recipe.kv) + " KV");
  if (h.n_layer != uint32_t(c.n_layer) || h.n_head_kv != uint32_t(c.n_head_kv) ||
      h.head_dim != uint32_t(c.head_dim))
    throw Error(ErrorCode::ModelMismatch,
                what + "has KV layout " + std::to_string(h.n_layer) + " layers x " + std::to_string(h.n_head_kv) +
                    " KV heads x " + std::to_string(h.head_dim) + ", the model needs " + std::to_string(c.n_layer) +
                    " x " + std::to_string(c.n_head_kv) + " x " + std::to_string(c.head_dim));
}

void check_prompt(const std::vector<int32_t>& chain_tokens, std::span<const int32_t> prompt) {
  const size_t common = std::min(chain_tokens.size(), prompt.size());
  for (size_t i = 0; i < common; ++i)
    if (chain_tokens[i] != prompt[i])
      throw Error(ErrorCode::TokenMismatch, "prompt diverges from the artifact at position " + std::to_string(i) +
                                                ": the artifact has token " + std::to_string(chain_tokens[i]) +
                                                ", the prompt has " + std::to_string(prompt[i]));
  if (prompt.size() < chain_tokens.size())
    throw Error(ErrorCode::TokenMismatch, "prompt has " + std::to_string(prompt.size()) +
                                              " tokens, fewer than the artifact's " +
                                              std::to_string(chain_tokens.size()));
}

}  // namespace

std::string artifact_label(const Digest& id) { return "artifact " + to_hex(id).substr(0, 16) + ": "; }

ChainPlan plan_chain(const Session& session, const Digest& leaf, const ArtifactOpener& open,
                     std::optional<std::span<const int32_t>> prompt) {
  ChainPlan plan;
  plan.headers = chain_headers(leaf, open);
  plan.ids.resize(plan.headers.size());
  plan.ids.back() = leaf;
  for (size_t i = plan.headers.size() - 1; i > 0; --i) plan.ids[i - 1] = *plan.headers[i].parent;
  std::vector<int32_t> chain_tokens(session.tokens());
  for (const auto& h : plan.headers) chain_tokens.insert(chain_tokens.end(), h.tokens.begin(), h.tokens.end());
  if (prompt) check_prompt(chain_tokens, *prompt);
  return plan;
}

ChainLinkChecker::ChainLinkChecker(const Session& session) : session_(session), position_(session.n_past()) {
  running_.update(as_u32(session.tokens()));
}

void ChainLinkChecker::check_header(const ChainPlan& plan, size_t i, const ArtifactHeader& h) {
  const Digest& id = plan.ids[i];
  check_compatible(h, session_, id);
  const std::string what = artifact_label(id);
  if (int64_t(h.position_start) != position_)
    throw Error(ErrorCode::Corrupt, what + "starts at position " + std::to_string(h.position_start) +
                                        " but the context holds " + std::to_string(position_));
  if (i > 0 && (!h.parent || *h.parent != plan.ids[i - 1]))
    throw Error(ErrorCode::Corrupt, what + "does not name " + to_hex(plan.ids[i - 1]).substr(0, 16) + " as its parent");
  if (h.tokens != plan.headers[i].tokens) throw Error(ErrorCode::Corrupt, what + "changed while it was being read");
  running_.update(h.tokens);
  TokenHasher copy = running_;
  if (copy.finish() != h.chain_tokens_sha256)
    throw Error(ErrorCode::Corrupt, what + "its chain token hash does not match the tokens of its chain");
  position_ = int64_t(h.position_end());
}

void ChainLinkChecker::check_identity(const Digest& identity, const Digest& id) {
  if (identity != id)
    throw Error(ErrorCode::Corrupt, artifact_label(id) + "its bytes hash to " + to_hex(identity) + ", not to its name");
}

}  // namespace kvg
