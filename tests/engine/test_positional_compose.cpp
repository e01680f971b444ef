// Positional composition (engine/positional_compose.hpp): blocks captured on
// their own, placed one after another. Not exact — these tests pin what it
// does compute: the first block bit-identical to an exact graft, later blocks'
// values copied and keys rotated on by their offset with the recipe's rope,
// and every refusal (one block, beyond the window, another model or recipe)
// leaving the context untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/graft.hpp"
#include "engine/positional_compose.hpp"
#include "engine/prompt.hpp"
#include "kernels/cpu/kv_rounding.hpp"
#include "kernels/cpu/ops.hpp"
#include "kernels/cpu/rope_table.hpp"
#include "storage/artifact_format.hpp"
#include "tests/support/data_paths.hpp"
#include "engine/memory_artifacts.hpp"

namespace kvg {
namespace {

class Positional : public ::testing::Test {
 protected:
  void SetUp() override {
    KVG_REQUIRE_TEST_DATA(test::kStories260K);
    model_ = Model::load(test::data_path(test::kStories260K));
  }
  // A block: `text` as a fresh prompt, captured on its own as a root.
  Digest block(const std::string& text, std::shared_ptr<const Model> model = nullptr) {
    if (!model) model = model_;
    Session s(model, EngineOptions{});
    s.prefill(fresh_prompt(*model, text), 0, LogitsFor::None, nullptr);
    return store_.capture_from(s, 0, s.n_past());
  }
  std::shared_ptr<const Model> model_;
  MemoryArtifacts store_;
};

bool same_rows(const float* a, const float* b, int floats) { return std::memcmp(a, b, size_t(floats) * 4) == 0; }

TEST_F(Positional, PlacesBlocksInOrderFirstOneExactLaterOnesRotated) {
  const Digest a = block("Once upon a time, there was a girl named Zoe. Zoe had a pink dress.");
  const Digest b = block("Tom had a blue kite. Tom flew his blue kite in the park.");
  Session exact_a(model_, EngineOptions{}), alone_b(model_, EngineOptions{});
  graft(exact_a, a, store_.opener());
  graft(alone_b, b, store_.opener());

  Session s(model_, EngineOptions{});
  const Digest both[] = {a, b};
  const PositionalComposition c = graft_positional(s, both, store_.opener());
  EXPECT_FALSE(c.exact);
  ASSERT_EQ(c.blocks.size(), 2u);
  const int64_t na = exact_a.n_past(), nb = alone_b.n_past();
  EXPECT_EQ(c.blocks[0].placed_at, 0);
  EXPECT_EQ(c.blocks[1].placed_at, na);
  EXPECT_EQ(c.n_tokens, na + nb);
  ASSERT_EQ(s.n_past(), na + nb);
  std::vector<int32_t> tokens = exact_a.tokens();
  tokens.insert(tokens.end(), alone_b.tokens().begin(), alone_b.tokens().end());
  EXPECT_EQ(s.tokens(), tokens);

  const ModelConfig& cfg = model_->config();
  const int row = s.kv_cache().row_floats();
  const RopeTable table(cfg.rope_dim, cfg.rope_base);
  std::vector<float> cos(size_t(cfg.rope_dim / 2)), sin(size_t(cfg.rope_dim / 2));
  table.angles(na, cos.data(), sin.data());
  for (int l = 0; l < cfg.n_layer; ++l) {
    for (int64_t p = 0; p < na; ++p) {
      EXPECT_TRUE(same_rows(s.kv_cache().k(l, p), exact_a.kv_cache().k(l, p), row)) << "layer " << l << " pos " << p;
      EXPECT_TRUE(same_rows(s.kv_cache().v(l, p), exact_a.kv_cache().v(l, p), row));
    }
    for (int64_t p = 0; p < nb; ++p) {
      EXPECT_TRUE(same_rows(s.kv_cache().v(l, na + p), alone_b.kv_cache().v(l, p), row));
      std::vector<float> k(alone_b.kv_cache().k(l, p), alone_b.kv_cache().k(l, p) + row);
      apply_rope(k.data(), cfg.n_head_kv, cfg.head_dim, cfg.rope_dim, cos.data(), sin.data(), cfg.rope_style);
      EXPECT_TRUE(same_rows(s.kv_cache().k(l, na + p), k.data(), row)) << "layer " << l << " pos " << na + p;
      EXPECT_FALSE(same_rows(s.kv_cache().k(l, na + p), alone_b.kv_cache().k(l, p), row));
    }
  }
  // The composition continues like any context (not exactly like the chain).
  std::vector<float> logits;
  const int32_t next[1] = {tokens.back()};
  s.forward(next, LogitsFor::Last, &logits);
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
}

// Under a compact KV storage each block is a compact artifact; the keys a
// placement turns are rounded again to the storage, so the composed cache
// still holds only storable values (a capture of it is accepted) — and the
// composition stays labelled inexact.
TEST_F(Positional, UnderCompactKvTurnedKeysAreRoundedAgain) {
  for (KvStorage storage : {KvStorage::BF16, KvStorage::I8}) {
    SCOPED_TRACE(kv_storage_name(storage));
    EngineOptions options;
    options.recipe.kv = storage;
    auto compact_block = [&](const std::string& text) {
      Session s(model_, options);
      s.prefill(fresh_prompt(*model_, text), 0, LogitsFor::None, nullptr);
      return store_.capture_from(s, 0, s.n_past());
    };
    const Digest a = compact_block("Once upon a time, there was a girl named Zoe.");
    const Digest b = compact_block("Tom had a blue kite.");
    Session alone_b(model_, options);
    graft(alone_b, b, store_.opener());
    Session s(model_, options);
    const Digest both[] = {a, b};
    const PositionalComposition c = graft_positional(s, both, store_.opener());
    EXPECT_FALSE(c.exact);
    const ModelConfig& cfg = model_->config();
    const int row = s.kv_cache().row_floats();
    const int64_t na = c.blocks[1].placed_at;
    const RopeTable table(cfg.rope_dim, cfg.rope_base);
    std::vector<float> cos(size_t(cfg.rope_dim / 2)), sin(size_t(cfg.rope_dim / 2));
    table.angles(na, cos.data(), sin.data());
    bool rounding_mattered = false;
    for (int l = 0; l < cfg.n_layer; ++l)
      for (int64_t p = 0; p < c.blocks[1].n_tokens; ++p) {
        EXPECT_TRUE(same_rows(s.kv_cache().v(l, na + p), alone_b.kv_cache().v(l, p), row));
        std::vector<float> k(alone_b.kv_cache().k(l, p), alone_b.kv_cache().k(l, p) + row);
        apply_rope(k.data(), cfg.n_head_kv, cfg.head_dim, cfg.rope_dim, cos.data(), sin.data(), cfg.rope_style);
        const std::vector<float> turned = k;
        round_kv_rows(kv_rounding_of(storage), k.data(), cfg.n_head_kv, cfg.head_dim);
        rounding_mattered |= !same_rows(turned.data(), k.data(), row);
        EXPECT_TRUE(same_rows(s.kv_cache().k(l, na + p), k.data(), row)) << "layer " << l << " pos " << na + p;
      }
    EXPECT_TRUE(rounding_mattered) << "the turned keys were already storable: the test proves nothing";
    MemorySink sink;
    EXPECT_NO_THROW(capture(s, 0, s.n_past(), std::nullopt, sink));
  }
}

TEST_F(Positional, IsNotTheExactChain) {
  const Digest a = block("Lily had a red ball. She played with her red ball every day.");
  const Digest b = block("Ben went to the beach with his mom. Ben found a shell.");
  Session s(model_, EngineOptions{});
  const Digest both[] = {a, b};
  graft_positional(s, both, store_.opener());
  const std::vector<int32_t> tokens = s.tokens();
  std::vector<float> positional, exact;
  const int32_t next[1] = {tokens.back()};
  s.forward(next, LogitsFor::Last, &positional);
  Session chain(model_, EngineOptions{});
  std::vector<int32_t> all = tokens;
  all.push_back(tokens.back());
  chain.forward(all, LogitsFor::Last, &exact);
  EXPECT_NE(positional, exact) << "the second block never attended to the first: it cannot be exact";
}

// A session on a shared pool (the engine worker's) composes the same KV:
// the scratch context that verifies each block runs on its own thread.
TEST_F(Positional, ASessionOnASharedPoolComposesTheSameKv) {
  const Digest a = block("Lily had a red ball. She played with her red ball every day.");
  const Digest b = block("Ben went to the beach with his mom. Ben found a shell.");
  const Digest both[] = {a, b};
  EngineOptions pooled;
  pooled.threads = 2;
  pooled.pool = std::make_shared<ThreadPool>(2);
  Session on_pool(model_, pooled), alone(model_, EngineOptions{});
  graft_positional(on_pool, both, store_.opener());
  graft_positional(alone, both, store_.opener());
  ASSERT_EQ(on_pool.tokens(), alone.tokens());
  const int floats = on_pool.kv_cache().row_floats();
  for (int l = 0; l < on_pool.kv_cache().n_layer(); ++l)
    for (int64_t p = 0; p < on_pool.n_past(); ++p) {
      ASSERT_TRUE(same_rows(on_pool.kv_cache().k(l, p), alone.kv_cache().k(l, p), floats)) << l << " " << p;
      ASSERT_TRUE(same_rows(on_pool.kv_cache().v(l, p), alone.kv_cache().v(l, p), floats)) << l << " " << p;
    }
}

TEST_F(Positional, RefusesOneBlockAndLeavesTheContextAlone) {
  const Digest a = block("Zoe had a pink dress.");
  Session s(model_, EngineOptions{});
  const Digest one[] = {a};
  try {
    graft_positional(s, one, store_.opener());
    FAIL() << "one block accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("at least 2 blocks"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s.n_past(), 0);
}

TEST_F(Positional, RefusesACompositionLongerThanTheWindowBeforeReadingKv) {
  const Digest a = block("Once upon a time, there was a girl named Zoe. Zoe had a pink dress and a red hat.");
  EngineOptions small;
  small.max_context = 40;
  Session s(model_, small);
  const Digest three[] = {a, a, a};
  try {
    graft_positional(s, three, store_.opener());
    FAIL() << "a composition beyond the window accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::OutOfRange);
    EXPECT_NE(std::string(e.what()).find("more than the window of 40 positions"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s.n_past(), 0);
}

TEST_F(Positional, RefusesABlockOfAnotherModel) {
  KVG_REQUIRE_TEST_DATA(test::kTinyStories656K);
  const auto other = Model::load(test::data_path(test::kTinyStories656K));
  const Digest mine = block("Zoe had a pink dress.");
  const Digest theirs = block("Tom had a blue kite.", other);
  Session s(model_, EngineOptions{});
  const Digest both[] = {mine, theirs};
  try {
    graft_positional(s, both, store_.opener());
    FAIL() << "a block of another model accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::ModelMismatch) << e.what();
  }
  EXPECT_EQ(s.n_past(), 0);
}

TEST_F(Positional, RefusesABlockOfAnotherRecipe) {
  Session src(model_, EngineOptions{});
  src.prefill(fresh_prompt(*model_, "Tom had a blue kite."), 0, LogitsFor::None, nullptr);
  ArtifactHeader h = capture_header(src, 0, src.n_past(), std::nullopt);
  h.recipe = "f32-some-other-recipe-v9";
  MemorySink sink;
  ArtifactWriter writer(h, sink);
  for (uint32_t l = 0; l < h.n_layer; ++l) writer.write_layer(l, src.kv_cache().k(int(l), 0), src.kv_cache().v(int(l), 0));
  const Digest foreign = writer.finish();
  store_.bytes[foreign] = sink.bytes();
  const Digest mine = block("Zoe had a pink dress.");
  Session s(model_, EngineOptions{});
  const Digest both[] = {mine, foreign};
  try {
    graft_positional(s, both, store_.opener());
    FAIL() << "a block of another recipe accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::RecipeMismatch) << e.what();
  }
  EXPECT_EQ(s.n_past(), 0);
}

}  // namespace
}  // namespace kvg
