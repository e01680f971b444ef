#include "engine/graft.hpp"

#include <algorithm>
#include <chrono>

#include "common/error.hpp"

namespace kvg {

namespace {

std::vector<uint32_t> as_u32(std::span<const int32_t> ids) { return {ids.begin(), ids.end()}; }

std::string short_hash(const Digest& d) { return to_hex(d).substr(0, 16); }

// Refuses an artifact that this session's model and recipe cannot use.
void check_compatible(const ArtifactHeader& h, const Session& session, const Digest& id) {
  const Model& model = session.model();
  const ModelConfig& c = model.config();
  const std::string what = "artifact " + short_hash(id) + ": ";
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

ArtifactHeader read_header(const Digest& id, const ArtifactOpener& open) {
  auto source = open(id);
  ArtifactReader reader(*source);
  return reader.header();
}

}  // namespace

ArtifactHeader capture_header(const Session& session, int64_t from, int64_t to, const std::optional<Digest>& parent) {
  if (from < 0 || to <= from || to > session.n_past())
    throw Error(ErrorCode::InvalidArgument, "capture range [" + std::to_string(from) + ", " + std::to_string(to) +
                                                ") is empty or outside the " + std::to_string(session.n_past()) +
                                                " evaluated positions");
  if (from > 0 && !parent)
    throw Error(ErrorCode::InvalidArgument, "an artifact that starts at position " + std::to_string(from) +
                                                " needs the parent artifact holding positions before it");
  const ModelConfig& c = session.model().config();
  ArtifactHeader h;
  h.model_fingerprint = session.model().fingerprint();
  h.parent = parent;
  h.recipe = session.options().recipe.name();
  h.kv_dtype = uint32_t(session.options().recipe.kv);
  h.n_layer = uint32_t(c.n_layer);
  h.n_head_kv = uint32_t(c.n_head_kv);
  h.head_dim = uint32_t(c.head_dim);
  h.position_start = uint32_t(from);
  const std::vector<uint32_t> all = as_u32(std::span<const int32_t>(session.tokens().data(), size_t(to)));
  h.chain_tokens_sha256 = hash_token_ids(all);
  h.tokens.assign(all.begin() + from, all.end());
  return h;
}

Digest capture(const Session& session, int64_t from, int64_t to, const std::optional<Digest>& parent,
               ByteSink& sink) {
  const ArtifactHeader h = capture_header(session, from, to, parent);
  ArtifactWriter writer(h, sink);
  const KvCache& kv = session.kv_cache();
  // Cache rows of consecutive positions are contiguous: exactly the
  // artifact's [n_tokens][n_head_kv][head_dim] block.
  for (uint32_t l = 0; l < h.n_layer; ++l) writer.write_layer(l, kv.k(int(l), from), kv.v(int(l), from));
  return writer.finish();
}

std::vector<ArtifactHeader> chain_headers(const Digest& leaf, const ArtifactOpener& open) {
  std::vector<ArtifactHeader> chain;
  Digest id = leaf;
  for (;;) {
    ArtifactHeader h = read_header(id, open);
    const std::optional<Digest> parent = h.parent;
    chain.push_back(std::move(h));
    if (!parent) break;
    if (chain.size() > 100000) throw Error(ErrorCode::Corrupt, "artifact chain is implausibly long (a cycle?)");
    id = *parent;
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

GraftedChain graft(Session& session, const Digest& leaf, const ArtifactOpener& open,
                   std::optional<std::span<const int32_t>> prompt, GraftTimes* times) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t_start = Clock::now();
  auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  GraftTimes spent;
  // Walk the parents first, so a prompt mismatch or a missing parent is
  // reported before any payload is read.
  const std::vector<ArtifactHeader> headers = chain_headers(leaf, open);
  std::vector<Digest> ids(headers.size());
  ids.back() = leaf;
  for (size_t i = headers.size() - 1; i > 0; --i) ids[i - 1] = *headers[i].parent;
  std::vector<int32_t> chain_tokens(session.tokens());
  for (const auto& h : headers) chain_tokens.insert(chain_tokens.end(), h.tokens.begin(), h.tokens.end());
  if (prompt) check_prompt(chain_tokens, *prompt);

  const int64_t start = session.n_past();
  GraftedChain result;
  try {
    TokenHasher running;
    running.update(as_u32(session.tokens()));
    for (size_t i = 0; i < headers.size(); ++i) {
      auto source = open(ids[i]);
      ArtifactReader reader(*source);
      const ArtifactHeader& h = reader.header();
      check_compatible(h, session, ids[i]);
      const std::string what = "artifact " + short_hash(ids[i]) + ": ";
      if (int64_t(h.position_start) != session.n_past())
        throw Error(ErrorCode::Corrupt, what + "starts at position " + std::to_string(h.position_start) +
                                            " but the context holds " + std::to_string(session.n_past()));
      if (i > 0 && (!h.parent || *h.parent != ids[i - 1]))
        throw Error(ErrorCode::Corrupt, what + "does not name " + short_hash(ids[i - 1]) + " as its parent");
      if (h.tokens != headers[i].tokens)
        throw Error(ErrorCode::Corrupt, what + "changed while it was being read");
      running.update(h.tokens);
      TokenHasher copy = running;
      if (copy.finish() != h.chain_tokens_sha256)
        throw Error(ErrorCode::Corrupt, what + "its chain token hash does not match the tokens of its chain");
      const std::vector<int32_t> tokens(h.tokens.begin(), h.tokens.end());
      KvCache& kv = session.kv_cache();
      const Clock::time_point t_reserve = Clock::now();
      kv.reserve(int64_t(h.position_end()));
      spent.reserve_s += seconds_since(t_reserve);
      for (uint32_t l = 0; l < h.n_layer; ++l)
        reader.read_layer(l, kv.k(int(l), h.position_start), kv.v(int(l), h.position_start));
      // Nothing read counts until the trailer and the identity check out.
      const Digest identity = reader.finish();
      spent.hash_s += reader.hash_seconds();
      spent.source_s += reader.source_seconds();
      if (identity != ids[i])
        throw Error(ErrorCode::Corrupt, what + "its bytes hash to " + to_hex(identity) + ", not to its name");
      session.append_grafted(tokens);
      result.links.push_back(identity);
    }
  } catch (...) {
    session.truncate(start);
    throw;
  }
  result.n_tokens = session.n_past() - start;
  spent.total_s = seconds_since(t_start);
  if (times) *times = spent;
  return result;
}

}  // namespace kvg
