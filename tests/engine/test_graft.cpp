// Capture and graft: a grafted context continues bit-identically to a
// monolithic recompute, for single artifacts and chains, greedy and sampled,
// at several thread counts; every damaged or mismatched artifact is refused
// with a precise reason and leaves the context untouched.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <tuple>

#include "engine/graft.hpp"
#include "engine/graft_check.hpp"
#include "engine/memory_artifacts.hpp"
#include "kernels/cpu/kv_rounding.hpp"
#include "storage/artifact_format.hpp"
#include "tests/support/data_paths.hpp"
#include "tests/support/synth_fixture.hpp"
#include "tools/synth_model.hpp"

namespace kvg {
namespace {

// Captures positions [from, to) of `tokens` into `store` (grafting the parent first).
Digest capture_prefix(MemoryArtifacts& store, std::shared_ptr<const Model> model,
                      const std::vector<int32_t>& tokens, int64_t from, int64_t to, std::optional<Digest> parent,
                      int threads = 1, Recipe recipe = kDefaultRecipe) {
  EngineOptions options;
  options.threads = threads;
  options.recipe = recipe;
  Session session(model, options);
  if (parent) graft(session, *parent, store.opener(), tokens);
  EXPECT_EQ(session.n_past(), from);
  session.prefill(std::span<const int32_t>(tokens.data() + from, size_t(to - from)), 0, LogitsFor::None, nullptr);
  return store.capture_from(session, from, to, parent);
}

std::vector<int32_t> story_tokens(const Model& model, size_t n) {
  std::vector<int32_t> ids = {1};
  for (size_t i = 1; i < n; ++i) ids.push_back(int32_t(3 + (i * 104729) % size_t(model.config().n_vocab - 3)));
  return ids;
}

const KvStorage kAllKvStorages[] = {KvStorage::F32, KvStorage::BF16, KvStorage::I8};

// Every exactness test runs under each recipe: each KV storage (a compact
// cache is rounded as it is written, so its graft is as exact as the f32
// one) and both arithmetics (q8-portable-v1's products are row-independent
// like f32's, so a grafted prefix gives the recomputed bits too).
class GraftOnModel : public ::testing::TestWithParam<std::tuple<const char*, Recipe>> {
 protected:
  void SetUp() override {
    KVG_REQUIRE_TEST_DATA(std::get<0>(GetParam()));
    model_ = Model::load(test::data_path(std::get<0>(GetParam())));
  }
  Recipe recipe() const { return std::get<1>(GetParam()); }
  KvStorage storage() const { return recipe().kv; }
  EngineOptions engine(int threads = 1) const {
    EngineOptions o;
    o.threads = threads;
    o.recipe = recipe();
    return o;
  }
  std::shared_ptr<const Model> model_;
  MemoryArtifacts store_;
};

TEST_P(GraftOnModel, SingleArtifactExactAtEverySplit) {
  const auto tokens = story_tokens(*model_, 75);
  for (int threads : {1, 2})
    for (int64_t split : {int64_t(1), int64_t(2), int64_t(31), int64_t(32), int64_t(33), int64_t(40), int64_t(74)}) {
      const Digest id = capture_prefix(store_, model_, tokens, 0, split, std::nullopt, threads, recipe());
      const EngineOptions engine = this->engine(threads);
      GraftCheckOptions options;
      options.samples = split == 40 ? 50 : 2;
      const auto r = graft_check(model_, engine, id, store_.opener(), tokens, options);
      EXPECT_TRUE(r.exact) << "split " << split << " threads " << threads;
      EXPECT_EQ(r.graft_logits_sha256, r.recompute_logits_sha256);
      EXPECT_EQ(r.kl_max, 0.0);
      EXPECT_EQ(r.argmax_agreement, 1.0);
      EXPECT_EQ(r.positions, int64_t(tokens.size()) - split);
      EXPECT_EQ(r.samples_equal, r.samples);
    }
}

TEST_P(GraftOnModel, ChainsOfTwoAndThreeLinksAreExact) {
  const auto tokens = story_tokens(*model_, 90);
  const Digest a = capture_prefix(store_, model_, tokens, 0, 20, std::nullopt, 1, recipe());
  const Digest b = capture_prefix(store_, model_, tokens, 20, 45, a, 1, recipe());
  const Digest c = capture_prefix(store_, model_, tokens, 45, 77, b, 1, recipe());
  for (const Digest& leaf : {b, c}) {
    GraftCheckOptions options;
    options.samples = 50;
    const auto r = graft_check(model_, engine(), leaf, store_.opener(), tokens, options);
    EXPECT_TRUE(r.exact);
    EXPECT_EQ(r.grafted_tokens, leaf == b ? 45 : 77);
  }
  // A chain link stores only its own positions.
  const ArtifactHeader hb = parse_header(store_.bytes[b]);
  EXPECT_EQ(hb.position_start, 20u);
  EXPECT_EQ(hb.n_tokens(), 25u);
  EXPECT_EQ(*hb.parent, a);
  // Greedy generation after the graft equals generation after a full prefill.
  Session grafted(model_, engine()), full(model_, engine());
  graft(grafted, c, store_.opener(), tokens);
  std::vector<float> lg, lf;
  grafted.prefill(std::span<const int32_t>(tokens).subspan(77), 0, LogitsFor::Last, &lg);
  full.prefill(tokens, 0, LogitsFor::Last, &lf);
  ASSERT_EQ(0, std::memcmp(lg.data(), lf.data(), lg.size() * 4));
  // The KV rows themselves are identical.
  for (int l = 0; l < model_->config().n_layer; ++l)
    ASSERT_EQ(0, std::memcmp(grafted.kv_cache().k(l, 0), full.kv_cache().k(l, 0),
                             size_t(tokens.size()) * size_t(model_->config().kv_row_floats()) * 4));
}

// A compact storage really rounds (the KV differs from f32's, every row is a
// fixed point of its rounding), its artifact is exactly header + n_layer * 2
// * n_tokens * n_head_kv * row bytes, and prefill chunking and thread count
// change no bit of its logits or KV.
TEST_P(GraftOnModel, CompactKvIsRoundedSizedAndChunkingInvariant) {
  const ModelConfig& c = model_->config();
  const auto tokens = story_tokens(*model_, 70);
  std::string first_hash;
  std::vector<float> first_kv;
  for (int threads : {1, 2})
    for (int64_t chunk : {int64_t(0), int64_t(1), int64_t(7), int64_t(32)}) {
      Session session(model_, engine(threads));
      std::vector<float> logits;
      session.prefill(tokens, chunk, LogitsFor::All, &logits);
      std::vector<float> kv;
      for (int l = 0; l < c.n_layer; ++l) {
        kv.insert(kv.end(), session.kv_cache().k(l, 0), session.kv_cache().k(l, 0) + tokens.size() * size_t(c.kv_row_floats()));
        kv.insert(kv.end(), session.kv_cache().v(l, 0), session.kv_cache().v(l, 0) + tokens.size() * size_t(c.kv_row_floats()));
      }
      if (first_hash.empty()) {
        first_hash = logits_sha256(logits);
        first_kv = kv;
        // Rounded: rounding again changes nothing.
        std::vector<float> again = kv;
        round_kv_rows(kv_rounding_of(storage()), again.data(), int64_t(again.size()) / c.head_dim, c.head_dim);
        EXPECT_EQ(0, std::memcmp(again.data(), kv.data(), kv.size() * 4));
        // Exactly sized.
        const Digest id = store_.capture_from(session, 0, int64_t(tokens.size()));
        const ArtifactHeader h = parse_header(store_.bytes[id]);
        EXPECT_EQ(h.recipe, engine().recipe.name());
        EXPECT_EQ(h.kv_dtype, uint32_t(storage()));
        const size_t row_bytes = storage() == KvStorage::F32 ? 4 * size_t(c.head_dim)
                                 : storage() == KvStorage::BF16 ? 2 * size_t(c.head_dim)
                                                                : 1 + size_t(c.head_dim);
        EXPECT_EQ(store_.bytes[id].size(), h.header_bytes() + size_t(c.n_layer) * 2 * tokens.size() *
                                                                   size_t(c.n_head_kv) * row_bytes + 32);
        if (storage() != KvStorage::F32) {  // and not what f32 storage holds
          Session plain(model_, EngineOptions{});
          plain.prefill(tokens, 0, LogitsFor::None, nullptr);
          EXPECT_NE(0, std::memcmp(plain.kv_cache().k(0, 0), kv.data(), size_t(c.kv_row_floats()) * tokens.size() * 4));
        }
        continue;
      }
      EXPECT_EQ(logits_sha256(logits), first_hash) << "threads " << threads << " chunk " << chunk;
      EXPECT_EQ(0, std::memcmp(kv.data(), first_kv.data(), kv.size() * 4)) << "threads " << threads << " chunk " << chunk;
    }
}

INSTANTIATE_TEST_SUITE_P(Models, GraftOnModel,
                         ::testing::Combine(::testing::Values(test::kStories260K, test::kTinyStories656K),
                                            ::testing::ValuesIn(all_recipes())),
                         [](const auto& info) {
                           const std::string model = std::string(std::get<0>(info.param)).find("260K") != std::string::npos
                                                         ? "stories260K"
                                                         : "TinyStories656K";
                           const Recipe& recipe = std::get<1>(info.param);
                           return model + (recipe.arithmetic == Arithmetic::Q8 ? "_q8" : "") + "_kv_" +
                                  kv_storage_name(recipe.kv);
                         });

class GraftRefusal : public ::testing::Test {
 protected:
  void SetUp() override {
    KVG_REQUIRE_TEST_DATA(test::kStories260K);
    model_ = Model::load(test::data_path(test::kStories260K));
    tokens_ = story_tokens(*model_, 30);
    root_ = capture_prefix(store_, model_, tokens_, 0, 12, std::nullopt);
    leaf_ = capture_prefix(store_, model_, tokens_, 12, 20, root_);
  }

  // Grafts and returns the error; the session must be unchanged afterwards.
  Error refusal(const Digest& id, const ArtifactOpener& open, std::span<const int32_t> prompt,
                const EngineOptions& options = {}) {
    Session session(model_, options);
    try {
      graft(session, id, open, prompt);
    } catch (const Error& e) {
      EXPECT_EQ(session.n_past(), 0);
      return e;
    }
    ADD_FAILURE() << "graft was accepted";
    return Error(ErrorCode::Internal, "accepted");
  }

  std::shared_ptr<const Model> model_;
  std::vector<int32_t> tokens_;
  MemoryArtifacts store_;
  Digest root_{}, leaf_{};
};

TEST_F(GraftRefusal, EveryFlippedBitIsRefused) {
  const std::vector<uint8_t> good = store_.bytes[root_];
  for (size_t byte = 0; byte < good.size(); byte += (byte < 300 ? 1 : 97)) {
    for (int bit : {0, 7}) {
      std::vector<uint8_t> bad = good;
      bad[byte] ^= uint8_t(1u << bit);
      ArtifactOpener open = [&](const Digest&) -> std::unique_ptr<ByteSource> { return std::make_unique<MemorySource>(bad); };
      const Error e = refusal(root_, open, tokens_);
      EXPECT_TRUE(e.code() == ErrorCode::Corrupt || e.code() == ErrorCode::Unsupported ||
                  e.code() == ErrorCode::ModelMismatch || e.code() == ErrorCode::RecipeMismatch ||
                  e.code() == ErrorCode::TokenMismatch)
          << "byte " << byte << ": " << e.what();
    }
  }
}

TEST_F(GraftRefusal, TruncatedAndEmptyArtifactsAreRefused) {
  const std::vector<uint8_t> good = store_.bytes[root_];
  for (size_t cut : {size_t(0), size_t(3), size_t(64), size_t(255), good.size() / 2, good.size() - 1}) {
    std::vector<uint8_t> bad(good.begin(), good.begin() + std::ptrdiff_t(cut));
    ArtifactOpener open = [&](const Digest&) -> std::unique_ptr<ByteSource> { return std::make_unique<MemorySource>(bad); };
    const Error e = refusal(root_, open, tokens_);
    EXPECT_EQ(e.code(), ErrorCode::Corrupt) << "cut " << cut << ": " << e.what();
  }
}

TEST_F(GraftRefusal, ContentThatDoesNotHashToItsNameIsRefused) {
  Digest wrong = root_;
  wrong[0] ^= 1;
  store_.bytes[wrong] = store_.bytes[root_];
  const Error e = refusal(wrong, store_.opener(), tokens_);
  EXPECT_EQ(e.code(), ErrorCode::Corrupt);
  EXPECT_NE(std::string(e.what()).find("not to its name"), std::string::npos) << e.what();
}

TEST_F(GraftRefusal, DivergingPromptNamesPositionAndBothIds) {
  std::vector<int32_t> prompt = tokens_;
  prompt[15] = prompt[15] == 5 ? 6 : 5;
  const Error e = refusal(leaf_, store_.opener(), prompt);
  EXPECT_EQ(e.code(), ErrorCode::TokenMismatch);
  const std::string expected = "position 15: the artifact has token " + std::to_string(tokens_[15]) +
                               ", the prompt has " + std::to_string(prompt[15]);
  EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  const std::vector<int32_t> short_prompt(tokens_.begin(), tokens_.begin() + 10);
  EXPECT_EQ(refusal(leaf_, store_.opener(), short_prompt).code(), ErrorCode::TokenMismatch);
}

TEST_F(GraftRefusal, MissingParentIsRefused) {
  store_.bytes.erase(root_);
  const Error e = refusal(leaf_, store_.opener(), tokens_);
  EXPECT_EQ(e.code(), ErrorCode::NotFound);
  EXPECT_NE(std::string(e.what()).find(to_hex(root_)), std::string::npos) << e.what();
}

TEST_F(GraftRefusal, AnotherModelIsRefused) {
  SynthOptions o;
  o.n_embd = 64;
  o.n_layer = 5;
  o.n_head = 8;
  o.n_head_kv = 4;
  o.n_ff = 172;
  o.n_vocab = 512;
  o.seed = 3;
  const std::string path = test::temp_dir("graft-other-model") + "/m.gguf";
  write_synth_model(o, path);
  auto other = Model::load(path);  // same KV layout, different weights
  Session session(other, EngineOptions{});
  try {
    graft(session, root_, store_.opener(), tokens_);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::ModelMismatch);
    EXPECT_NE(std::string(e.what()).find(model_->fingerprint_hex()), std::string::npos) << e.what();
  }
  EXPECT_EQ(session.n_past(), 0);
}

TEST_F(GraftRefusal, AnotherRecipeIsRefused) {
  Session session(model_, EngineOptions{});
  session.prefill(std::span<const int32_t>(tokens_.data(), 12), 0, LogitsFor::None, nullptr);
  ArtifactHeader h = capture_header(session, 0, 12, std::nullopt);
  h.recipe = "bf16-tensorcore-v1";
  MemorySink sink;
  ArtifactWriter writer(h, sink);
  for (uint32_t l = 0; l < h.n_layer; ++l) writer.write_layer(l, session.kv_cache().k(int(l), 0), session.kv_cache().v(int(l), 0));
  const Digest id = writer.finish();
  store_.bytes[id] = sink.bytes();
  const Error e = refusal(id, store_.opener(), tokens_);
  EXPECT_EQ(e.code(), ErrorCode::RecipeMismatch);
  EXPECT_NE(std::string(e.what()).find("bf16-tensorcore-v1"), std::string::npos) << e.what();
}

// An artifact of one KV storage is refused by a session of another, by
// recipe name; and one whose kv_dtype contradicts its recipe, by dtype.
TEST_F(GraftRefusal, AnotherKvStorageIsRefused) {
  EngineOptions bf16;
  bf16.recipe.kv = KvStorage::BF16;
  Session compact(model_, bf16);
  compact.prefill(std::span<const int32_t>(tokens_.data(), 12), 0, LogitsFor::None, nullptr);
  const Digest compact_id = store_.capture_from(compact, 0, 12);
  Error e = refusal(compact_id, store_.opener(), tokens_);  // into an f32 session
  EXPECT_EQ(e.code(), ErrorCode::RecipeMismatch);
  EXPECT_NE(std::string(e.what()).find("'f32-portable-v1+kv-bf16', this session computes 'f32-portable-v1'"),
            std::string::npos)
      << e.what();
  for (KvStorage storage : {KvStorage::BF16, KvStorage::I8}) {  // an f32 artifact into compact sessions
    EngineOptions o;
    o.recipe.kv = storage;
    const Error err = refusal(root_, store_.opener(), tokens_, o);
    EXPECT_EQ(err.code(), ErrorCode::RecipeMismatch);
    EXPECT_NE(std::string(err.what()).find("this session computes '" + o.recipe.name() + "'"), std::string::npos)
        << err.what();
  }
  // The bf16 recipe's name with an f32 payload: refused by dtype.
  ArtifactHeader h = capture_header(compact, 0, 12, std::nullopt);
  h.kv_dtype = kKvDtypeF32;
  MemorySink sink;
  ArtifactWriter writer(h, sink);
  for (uint32_t l = 0; l < h.n_layer; ++l) writer.write_layer(l, compact.kv_cache().k(int(l), 0), compact.kv_cache().v(int(l), 0));
  const Digest id = writer.finish();
  store_.bytes[id] = sink.bytes();
  e = refusal(id, store_.opener(), tokens_, bf16);
  EXPECT_EQ(e.code(), ErrorCode::RecipeMismatch);
  EXPECT_NE(std::string(e.what()).find("stores its KV as dtype 0, but recipe 'f32-portable-v1+kv-bf16' keeps bf16 KV"),
            std::string::npos)
      << e.what();
}

// Capturing a cache that was not rounded for the session's storage is a bug
// the writer names rather than an artifact that would graft other values.
TEST_F(GraftRefusal, CaptureOfAnUnroundedCacheIsRefused) {
  EngineOptions i8;
  i8.recipe.kv = KvStorage::I8;
  Session session(model_, i8);
  session.prefill(std::span<const int32_t>(tokens_.data(), 12), 0, LogitsFor::None, nullptr);
  session.kv_cache().v(1, 5)[3] += 1e-3f;  // no longer q * 2^e for its row
  MemorySink sink;
  try {
    capture(session, 0, 12, std::nullopt, sink);
    ADD_FAILURE() << "captured";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("KV row layer 1 V, token 5, head 0 is not what kv_dtype i8 stores"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(GraftRefusal, CaptureNeedsAParentForLaterPositions) {
  Session session(model_, EngineOptions{});
  session.prefill(tokens_, 0, LogitsFor::None, nullptr);
  MemorySink sink;
  EXPECT_THROW(capture(session, 5, 10, std::nullopt, sink), Error);
  EXPECT_THROW(capture(session, 0, 31, std::nullopt, sink), Error);
}


// A graft reserves room past its end, so the decode step after it writes into
// the same buffer: no reallocation that copies the whole cache (which used to
// be most of a long graft's cost beyond hashing), and the graft reports where
// its time went.
TEST_P(GraftOnModel, DecodeAfterGraftKeepsTheCacheInPlace) {
  // Past 256 positions, where the old exact-fit reservation made the next
  // token reallocate.
  const auto tokens = story_tokens(*model_, 300);
  const Digest id = capture_prefix(store_, model_, tokens, 0, 299, std::nullopt, 1, recipe());
  Session session(model_, engine());
  GraftTimes times;
  graft(session, id, store_.opener(), tokens, &times);
  EXPECT_GT(times.total_s, 0.0);
  EXPECT_GE(times.total_s, times.hash_s + times.source_s + times.reserve_s);
  EXPECT_GT(times.hash_s, 0.0);
  const float* k_before = session.kv_cache().k(0, 0);
  session.forward(std::span<const int32_t>(tokens.data() + 299, 1), LogitsFor::Last, nullptr);
  EXPECT_EQ(session.kv_cache().k(0, 0), k_before);
}

TEST(KvCache, ReserveLeavesHeadroomWithinTheBounds) {
  KvCache cache(2, 8, 1000);
  cache.reserve(300);
  const float* before = cache.k(1, 0);
  cache.reserve(300 + 256);  // within the headroom: same buffer
  EXPECT_EQ(cache.k(1, 0), before);
  KvCache small(2, 8, 310);
  small.reserve(300);
  small.reserve(310);  // the headroom never passes the context
  EXPECT_THROW(small.reserve(311), Error);
  // nor the byte bound: 2 layers x (K + V) x 8 floats = 128 bytes a position.
  KvCache bounded(2, 8, 1000, 128 * 305, "limit");
  bounded.reserve(300);
  bounded.reserve(305);
  EXPECT_THROW(bounded.reserve(306), Error);
}

}  // namespace
}  // namespace kvg

namespace kvg {
namespace {

// Every family: a graft split anywhere continues bit-identically to a
// monolithic recompute. For the sliding-window families (window 40) the
// splits fall before the window's start, inside the edge block, on a block
// boundary and past the window.
struct FamilyCase {
  const char* architecture;
  bool windowed;
  bool llama3_rope = false;
};

class GraftOnFamilyModel : public ::testing::TestWithParam<std::tuple<FamilyCase, KvStorage>> {};

TEST_P(GraftOnFamilyModel, ExactAtSplitsOnBothSidesOfTheWindow) {
  const FamilyCase& family = std::get<0>(GetParam());
  const KvStorage storage = std::get<1>(GetParam());
  SynthOptions o = test::small_synth_options();
  o.architecture = family.architecture;
  o.llama3_rope = family.llama3_rope;
  o.n_layer = o.architecture == "gemma3" ? 6 : 2;
  if (family.windowed) {
    o.sliding_window = 40;
    o.attn_softcap = 1.5f;
    o.final_softcap = 2.0f;
  }
  const std::string name = o.architecture + (family.llama3_rope ? "-llama3-rope" : "");
  auto model = test::load_synth(o, "graft-family-" + name);
  ASSERT_EQ(model->config().sliding_window, family.windowed ? 40 : 0);
  MemoryArtifacts store;
  const auto tokens = story_tokens(*model, 80);
  for (int64_t split : {int64_t(1), int64_t(8), int64_t(9), int64_t(31), int64_t(32), int64_t(39), int64_t(40),
                        int64_t(41), int64_t(47), int64_t(64), int64_t(79)}) {
    const Digest id = capture_prefix(store, model, tokens, 0, split, std::nullopt, 2, Recipe{Arithmetic::F32, storage});
    EngineOptions engine;
    engine.threads = 2;
    engine.recipe.kv = storage;
    GraftCheckOptions options;
    options.samples = 2;
    const auto r = graft_check(model, engine, id, store.opener(), tokens, options);
    EXPECT_TRUE(r.exact) << name << " split " << split;
    EXPECT_EQ(r.graft_logits_sha256, r.recompute_logits_sha256) << name << " split " << split;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, GraftOnFamilyModel,
                         ::testing::Combine(::testing::Values(FamilyCase{"llama", false, true}, FamilyCase{"qwen2", false},
                                                              FamilyCase{"qwen3", false}, FamilyCase{"phi3", true},
                                                              FamilyCase{"gemma", false}, FamilyCase{"gemma2", true},
                                                              FamilyCase{"gemma3", true}, FamilyCase{"starcoder2", false}),
                                            ::testing::ValuesIn(kAllKvStorages)),
                         [](const auto& info) {
                           const FamilyCase& f = std::get<0>(info.param);
                           return std::string(f.architecture) + (f.llama3_rope ? "_llama3_rope" : "") + "_kv_" +
                                  kv_storage_name(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace kvg
