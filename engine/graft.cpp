#include "engine/graft.hpp"

#include <algorithm>
#include <chrono>

#include "common/error.hpp"
#include "engine/chain_check.hpp"

namespace kvg {

namespace {

std::vector<uint32_t> as_u32(std::span<const int32_t> ids) { return {ids.begin(), ids.end()}; }

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
  if (from < session.mapped_end())
    throw Error(ErrorCode::InvalidArgument, "capture from position " + std::to_string(from) + ": positions below " +
                                                std::to_string(session.mapped_end()) +
                                                " are mapped from stored artifacts; capture from there with the "
                                                "chain's leaf as parent");
  ArtifactWriter writer(h, sink);
  const KvCache& kv = session.kv_cache();
  // Cache rows of consecutive positions are contiguous: exactly the
  // artifact's [n_tokens][n_head_kv][head_dim] block.
  for (uint32_t l = 0; l < h.n_layer; ++l) writer.write_layer(l, kv.k(int(l), from), kv.v(int(l), from));
  return writer.finish();
}

GraftedChain graft(Session& session, const Digest& leaf, const ArtifactOpener& open,
                   std::optional<std::span<const int32_t>> prompt, GraftTimes* times) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t_start = Clock::now();
  auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  GraftTimes spent;
  // Walk the parents first, so a prompt mismatch or a missing parent is
  // reported before any payload is read.
  const ChainPlan plan = plan_chain(session, leaf, open, prompt);
  const int64_t start = session.n_past();
  GraftedChain result;
  try {
    ChainLinkChecker checker(session);
    for (size_t i = 0; i < plan.headers.size(); ++i) {
      auto source = open(plan.ids[i]);
      ArtifactReader reader(*source);
      reader.overlap_hashing();  // the rows stay untouched until finish()
      const ArtifactHeader& h = reader.header();
      checker.check_header(plan, i, h);
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
      spent.hashed_behind_s += reader.overlapped_hash_seconds();
      ChainLinkChecker::check_identity(identity, plan.ids[i]);
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
