#include "engine/positional_compose.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/error.hpp"
#include "kernels/cpu/kv_rounding.hpp"
#include "kernels/cpu/ops.hpp"
#include "kernels/cpu/rope_table.hpp"

namespace kvg {

namespace {

std::string block_name(size_t i, const Digest& leaf) {
  return "block " + std::to_string(i + 1) + " (" + to_hex(leaf).substr(0, 16) + ")";
}

}  // namespace

void rerotate_keys(Session& session, int64_t from, int64_t n, int64_t delta) {
  if (delta == 0) return;  // placed at its own positions: left bit-identical
  const ModelConfig& c = session.model().config();
  const RopeTable table(c.rope_dim, c.rope_base);
  std::vector<float> cos(size_t(c.rope_dim / 2)), sin(size_t(c.rope_dim / 2));
  // The angle of a rotation by `delta` positions; every key of the block
  // turns by the same angle (rotations compose, up to rounding).
  table.angles(delta, cos.data(), sin.data());
  KvCache& kv = session.kv_cache();
  // Under a compact KV storage the turned keys are rounded again, so the
  // cache keeps holding only what that storage represents (what attention
  // would read of any key, and what a capture of the composed context can
  // store). Still not exact: the rounding is applied to an inexact rotation.
  const KvRowRounding rounding = kv_rounding_of(session.options().recipe.kv);
  for (int l = 0; l < kv.n_layer(); ++l)
    for (int64_t p = from; p < from + n; ++p) {
      apply_rope(kv.k(l, p), c.n_head_kv, c.head_dim, c.rope_dim, cos.data(), sin.data(), c.rope_style);
      round_kv_rows(rounding, kv.k(l, p), c.n_head_kv, c.head_dim);
    }
}

void require_composition_fits(size_t blocks, int64_t start, int64_t n_tokens, int64_t window) {
  if (start + n_tokens > window)
    throw Error(ErrorCode::OutOfRange, "a positional composition of " + std::to_string(blocks) + " blocks holds " +
                                           std::to_string(n_tokens) + " tokens" +
                                           (start > 0 ? " after the context's " + std::to_string(start) : std::string()) +
                                           ", more than the window of " + std::to_string(window) + " positions");
}

PositionalComposition graft_positional(Session& session, std::span<const Digest> leaves, const ArtifactOpener& open,
                                       const ProgressCheck& check) {
  if (leaves.size() < 2)
    throw Error(ErrorCode::InvalidArgument,
                "a positional composition needs at least 2 blocks, got " + std::to_string(leaves.size()) +
                    " (one block at its own positions is an exact graft)");
  // Headers only first: every refusal that does not need KV comes before any is read.
  const int64_t start = session.n_past();
  PositionalComposition out;
  int64_t longest = 0;
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (check) check();
    const std::vector<ArtifactHeader> chain = chain_headers(leaves[i], open);
    if (chain.front().position_start != 0)
      throw Error(ErrorCode::InvalidArgument, block_name(i, leaves[i]) + " starts at position " +
                                                  std::to_string(chain.front().position_start) +
                                                  ": a block of a positional composition is a chain from position 0");
    const int64_t n = int64_t(chain.back().position_end());
    out.blocks.push_back(PlacedBlock{leaves[i], start + out.n_tokens, n});
    out.n_tokens += n;
    longest = std::max(longest, n);
  }
  require_composition_fits(leaves.size(), start, out.n_tokens, session.max_context());

  // Each block is grafted — and so verified link by link — into a scratch
  // context at its own positions, then moved to where it is placed.
  EngineOptions scratch_options = session.options();
  scratch_options.device = Device::Cpu;
  scratch_options.threads = 1;
  scratch_options.pool.reset();  // the session's shared pool (the engine worker's) has its own size
  scratch_options.max_context = longest;
  Session scratch(session.shared_model(), scratch_options);
  KvCache& kv = session.kv_cache();
  const size_t row_bytes = size_t(kv.row_floats()) * sizeof(float);
  try {
    kv.reserve(start + out.n_tokens);
    for (const PlacedBlock& block : out.blocks) {
      if (check) check();
      scratch.truncate(0);
      graft(scratch, block.leaf, open);
      const KvCache& from = scratch.kv_cache();
      for (int l = 0; l < kv.n_layer(); ++l) {
        std::memcpy(kv.k(l, block.placed_at), from.k(l, 0), row_bytes * size_t(block.n_tokens));
        std::memcpy(kv.v(l, block.placed_at), from.v(l, 0), row_bytes * size_t(block.n_tokens));
      }
      rerotate_keys(session, block.placed_at, block.n_tokens, block.placed_at);
      session.append_grafted(scratch.tokens());
    }
  } catch (...) {
    session.truncate(start);
    throw;
  }
  return out;
}

}  // namespace kvg
