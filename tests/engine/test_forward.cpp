// The forward pass: reference behaviour of the test models (tests/data), agreement with
// an independent double-precision implementation, bitwise invariance across
// chunking, threads and ISA, and pinned golden hashes.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <thread>

#include "engine/generate.hpp"
#include "engine/prompt.hpp"
#include "engine/session.hpp"
#include "kernels/cpu/matmul_q8.hpp"
#include "storage/sha256.hpp"
#include "tests/support/data_paths.hpp"
#include "tests/support/kernel_fixtures.hpp"
#include "tests/support/reference_forward.hpp"
#include "tests/support/synth_fixture.hpp"
#include "tools/synth_model.hpp"

namespace kvg {
namespace {

using test::supported_isas;

// Prompts: BOS plus the first tokens of each model's greedy story, then ids
// spread over the vocabulary, so several attention blocks (32) are crossed.
std::vector<int32_t> prompt_for(const Model& model, size_t length) {
  std::vector<int32_t> ids = {1};
  const int n_vocab = model.config().n_vocab;
  for (size_t i = 1; i < length; ++i) ids.push_back(int32_t(3 + (i * 7919) % size_t(n_vocab - 3)));
  return ids;
}

constexpr Recipe kQ8Recipe{Arithmetic::Q8, KvStorage::F32};

std::vector<float> logits_of(std::shared_ptr<const Model> model, const std::vector<int32_t>& tokens, int64_t chunk,
                             int threads, Isa isa, Recipe recipe = kDefaultRecipe) {
  EngineOptions options;
  options.threads = threads;
  options.isa = isa;
  options.recipe = recipe;
  Session session(std::move(model), options);
  std::vector<float> logits;
  session.prefill(tokens, chunk, LogitsFor::All, &logits);
  return logits;
}

std::string hash_of(const std::vector<float>& logits) {
  return to_hex(sha256(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(logits.data()), logits.size() * 4)));
}

std::vector<int32_t> greedy(std::shared_ptr<const Model> model, int n) {
  Session session(std::move(model), EngineOptions{});
  GenerateOptions options;
  options.max_new_tokens = n;
  options.stop_at_eos = false;
  const int32_t bos[1] = {1};
  return generate(session, bos, options).tokens;
}

// Sessions run side by side in batched passes (Session::forward_batch) and,
// call for call, alone: at every round a random subset takes part, each with
// a prefill chunk or a decode row of random tokens and logits for all rows,
// the last or none, in a random order (so the session that runs the pass
// changes). Every logits row and, at the end, every KV row must be the same
// bytes either way.
void expect_batched_equals_alone(std::shared_ptr<const Model> model, Recipe recipe, int threads, uint32_t seed) {
  constexpr int kSessions = 5;
  EngineOptions options;
  options.recipe = recipe;
  options.max_context = 120;
  std::vector<std::unique_ptr<Session>> batched, alone;
  for (int i = 0; i < kSessions; ++i) {
    options.threads = threads;
    batched.push_back(std::make_unique<Session>(model, options));
    options.threads = 1;
    alone.push_back(std::make_unique<Session>(model, options));
  }
  std::mt19937 rng(seed);
  const int n_vocab = model->config().n_vocab;
  for (int round = 0; round < 30; ++round) {
    std::vector<std::vector<int32_t>> tokens(kSessions);
    std::vector<std::vector<float>> logits(kSessions);
    std::vector<ForwardRequest> requests;
    for (int i = 0; i < kSessions; ++i) {
      const int64_t room = batched[size_t(i)]->max_context() - batched[size_t(i)]->n_past();
      if (rng() % 4 == 0 || room == 0) continue;  // sits this round out
      const int64_t length = rng() % 3 == 0 ? 1 + int64_t(rng() % uint32_t(std::min<int64_t>(room, 37))) : 1;
      for (int64_t j = 0; j < length; ++j) tokens[size_t(i)].push_back(int32_t(rng() % uint32_t(n_vocab)));
      const LogitsFor which = std::array{LogitsFor::All, LogitsFor::Last, LogitsFor::None}[rng() % 3];
      requests.push_back({batched[size_t(i)].get(), tokens[size_t(i)], which, &logits[size_t(i)]});
    }
    std::shuffle(requests.begin(), requests.end(), rng);
    Session::forward_batch(requests);
    for (const ForwardRequest& r : requests) {
      const size_t i = size_t(std::find_if(batched.begin(), batched.end(), [&](const auto& b) { return b.get() == r.session; }) - batched.begin());
      std::vector<float> expected;
      alone[i]->forward(tokens[i], r.which, &expected);
      ASSERT_EQ(batched[i]->tokens(), alone[i]->tokens()) << "round " << round << ", session " << i;
      if (r.which == LogitsFor::None) continue;
      ASSERT_EQ(logits[i].size(), expected.size()) << "round " << round << ", session " << i;
      ASSERT_EQ(0, std::memcmp(logits[i].data(), expected.data(), expected.size() * 4))
          << "round " << round << ", session " << i << ", " << requests.size() << " sessions in the pass";
    }
  }
  const ModelConfig& c = model->config();
  for (size_t i = 0; i < kSessions; ++i)
    for (int l = 0; l < c.n_layer; ++l)
      for (int64_t p = 0; p < batched[i]->n_past(); ++p) {
        const KvCache& b = batched[i]->kv_cache();
        const KvCache& a = alone[i]->kv_cache();
        ASSERT_EQ(0, std::memcmp(b.k(l, p), a.k(l, p), size_t(c.kv_row_floats()) * 4)) << i << " " << l << " " << p;
        ASSERT_EQ(0, std::memcmp(b.v(l, p), a.v(l, p), size_t(c.kv_row_floats()) * 4)) << i << " " << l << " " << p;
      }
}

TEST(Forward, Stories260KGreedyMatchesReference) {
  KVG_REQUIRE_TEST_DATA(test::kStories260K);
  auto model = Model::load(test::data_path(test::kStories260K));
  const auto ids = greedy(model, 60);
  const std::vector<int32_t> expected_start = {403, 407, 261, 378, 432, 383, 286, 261, 376, 298};
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + 10), expected_start);
  EXPECT_EQ(model->tokenizer().decode(ids),
            "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, "
            "she saw a big, red ball. She wanted to play with it, but it was too high");
}

TEST(Forward, TinyStories656KGreedyMatchesReference) {
  KVG_REQUIRE_TEST_DATA(test::kTinyStories656K);
  auto model = Model::load(test::data_path(test::kTinyStories656K));
  const auto ids = greedy(model, 60);
  const std::vector<int32_t> expected_start = {147, 201, 282, 215, 286, 598, 1662, 356, 499, 826};
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + 10), expected_start);
  const std::string text = model->tokenizer().decode(ids);
  EXPECT_EQ(text.rfind("Once upon a time, there was a little girl named Lily. She had a toy car that she loved "
                       "very much. One day, she went to the park to play with her toy car in the park. Lily was "
                       "very happy with her toy car because she had no one to play with.\nWhile playing, Lily saw "
                       "a little bird.", 0),
            0u)
      << text;
}

// The vendored models under each recipe: stories260K is F32, so
// q8-portable-v1 computes it exactly as f32-portable-v1; TinyStories-656K is
// Q8_0, so every matrix product there takes the integer path.
struct ModelUnderRecipe {
  const char* model;
  Recipe recipe;
};

class SharedModel : public ::testing::TestWithParam<ModelUnderRecipe> {
 protected:
  void SetUp() override {
    KVG_REQUIRE_TEST_DATA(GetParam().model);
    model_ = Model::load(test::data_path(GetParam().model));
    recipe_ = GetParam().recipe;
  }
  std::shared_ptr<const Model> model_;
  Recipe recipe_;
};

TEST_P(SharedModel, AgreesWithDoublePrecisionReference) {
  const auto tokens = prompt_for(*model_, 40);
  const auto ours = logits_of(model_, tokens, 0, 1, Isa::Scalar, recipe_);
  const auto reference = test::reference_logits(*model_, tokens);
  ASSERT_EQ(ours.size(), reference.size());
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(double(ours[i]) - reference[i]));
    max_abs = std::max(max_abs, std::abs(reference[i]));
  }
  // fp32 against fp64 over a few layers: differences of order 1e-5 of the
  // logit scale; a wrong rope, norm or head mapping gives differences of order 1.
  // int8 activations (q8-portable-v1 on a quantized model) round each
  // product's input to 1/254 of its block's largest value: measured 1.7e-2 of
  // the logit scale on TinyStories-656K (2e-2 on the synthetic models of
  // every format below); 5e-2 still catches those mistakes.
  const bool integer_products = recipe_.arithmetic == Arithmetic::Q8 && q8_applies(model_->layers()[0].wq.type);
  const double bound = integer_products ? 5e-2 : 1e-4;
  EXPECT_LT(max_diff, bound * std::max(1.0, max_abs)) << "max |logit| " << max_abs;
}

TEST_P(SharedModel, BitwiseInvariantAcrossChunksThreadsAndIsa) {
  const auto tokens = prompt_for(*model_, 70);
  const auto baseline = logits_of(model_, tokens, 0, 1, Isa::Scalar, recipe_);
  for (Isa isa : supported_isas())
    for (int threads : {1, 2, 3})
      for (int64_t chunk : {1, 2, 3, 7, 16, 0}) {
        const auto logits = logits_of(model_, tokens, chunk, threads, isa, recipe_);
        ASSERT_EQ(logits.size(), baseline.size());
        ASSERT_EQ(0, std::memcmp(logits.data(), baseline.data(), logits.size() * 4))
            << "isa " << isa_name(isa) << ", threads " << threads << ", chunk " << chunk;
      }
}

// A session inherits the activation buffers of the last one to finish on
// its thread (engine/forward.cpp), still holding that session's values: a
// longer prompt's, other tokens. Its logits equal a session's on a fresh
// thread, whose buffers are new.
TEST_P(SharedModel, InheritedActivationBuffersChangeNothing) {
  const auto tokens = prompt_for(*model_, 40);
  std::vector<float> fresh;
  std::thread([&] { fresh = logits_of(model_, tokens, 0, 2, default_isa(), recipe_); }).join();
  std::vector<int32_t> other = prompt_for(*model_, 90);
  std::reverse(other.begin(), other.end());
  logits_of(model_, other, 0, 2, default_isa(), recipe_);  // leaves its buffers to the next session here
  const auto inherited = logits_of(model_, tokens, 0, 2, default_isa(), recipe_);
  ASSERT_EQ(inherited.size(), fresh.size());
  EXPECT_EQ(0, std::memcmp(inherited.data(), fresh.data(), fresh.size() * 4));
}

TEST_P(SharedModel, BatchedPassesEqualEachSessionAlone) {
  for (int threads : {1, 2, 3}) expect_batched_equals_alone(model_, recipe_, threads, 11 + uint32_t(threads));
  Recipe compact = recipe_;
  compact.kv = KvStorage::I8;
  expect_batched_equals_alone(model_, compact, 2, 7);
}

TEST_P(SharedModel, DecodeStepEqualsPrefillRow) {
  // A token decoded alone after its prefix gets the same logits as the same
  // position inside a batch.
  const auto tokens = prompt_for(*model_, 20);
  const auto all = logits_of(model_, tokens, 0, 2, default_isa(), recipe_);
  EngineOptions options;
  options.recipe = recipe_;
  Session session(model_, options);
  std::vector<float> last;
  session.prefill(std::span<const int32_t>(tokens.data(), tokens.size() - 1), 5, LogitsFor::None, nullptr);
  session.forward(std::span<const int32_t>(&tokens.back(), 1), LogitsFor::Last, &last);
  const size_t n_vocab = size_t(model_->config().n_vocab);
  ASSERT_EQ(0, std::memcmp(last.data(), all.data() + (tokens.size() - 1) * n_vocab, n_vocab * 4));
}

INSTANTIATE_TEST_SUITE_P(Models, SharedModel,
                         ::testing::Values(ModelUnderRecipe{test::kStories260K, kDefaultRecipe},
                                           ModelUnderRecipe{test::kTinyStories656K, kDefaultRecipe},
                                           ModelUnderRecipe{test::kStories260K, kQ8Recipe},
                                           ModelUnderRecipe{test::kTinyStories656K, kQ8Recipe}),
                         [](const auto& info) {
                           const std::string model = std::string(info.param.model).find("260K") != std::string::npos
                                                         ? "stories260K"
                                                         : "TinyStories656K";
                           return info.param.recipe == kDefaultRecipe ? model : model + "_q8";
                         });

// Golden hashes: the SHA-256 of the logits of a fixed prompt. If a change
// alters one, the arithmetic changed and the recipe version must change too
// (docs/design.md, recipe rule 6).
TEST(Forward, GoldenLogitsHashes) {
  struct Golden { const char* model; Recipe recipe; const char* sha256; };
  const Golden goldens[] = {
      {test::kStories260K, kDefaultRecipe, "969351937917a57882635dc852c953fabd8ecfcdce9b0a4a740afefbb6f9f3a0"},
      {test::kTinyStories656K, kDefaultRecipe, "19011a5190dc41ad46140d0e027be24351cfd324e1457d29ee749bfe82dc564e"},
      {test::kStories260K, kQ8Recipe, "969351937917a57882635dc852c953fabd8ecfcdce9b0a4a740afefbb6f9f3a0"},  // F32: as f32
      {test::kTinyStories656K, kQ8Recipe, "a90a65149149c1415a7d8fbf17bd55668f7e5c762058c9afd891f3973b25db66"},
  };
  for (const Golden& g : goldens) {
    KVG_REQUIRE_TEST_DATA(g.model);
    auto model = Model::load(test::data_path(g.model));
    EXPECT_EQ(hash_of(logits_of(model, prompt_for(*model, 40), 0, 1, default_isa(), g.recipe)), g.sha256)
        << g.model << " " << g.recipe.name();
  }
}

// q8-portable-v1 changes only products with block-quantized matrices: on an
// F32 model it is f32-portable-v1 to the bit (the golden hash above), on a
// Q8_0 model every product takes the integer path and the bits differ.
TEST(Forward, Q8RecipeEqualsF32ExactlyWhereNoMatrixIsQuantized) {
  for (const char* path : {test::kStories260K, test::kTinyStories656K}) {
    KVG_REQUIRE_TEST_DATA(path);
    auto model = Model::load(test::data_path(path));
    const auto tokens = prompt_for(*model, 40);
    const auto f32 = logits_of(model, tokens, 0, 1, default_isa());
    const auto q8 = logits_of(model, tokens, 0, 1, default_isa(), kQ8Recipe);
    ASSERT_EQ(f32.size(), q8.size());
    const bool same = std::memcmp(f32.data(), q8.data(), f32.size() * 4) == 0;
    EXPECT_EQ(same, !q8_applies(model->layers()[0].wq.type)) << path;
  }
}

// Synthetic models exercise every format kvg synth writes, GQA and widths
// that are not multiples of the 16-lane chunk (K-quants need 256-multiples).
TEST(Forward, SyntheticModelsInvariantForEveryWeightType) {
  struct Variant { const char* type; const char* architecture; };
  for (Variant variant : {Variant{"f32", "llama"}, Variant{"f16", "llama"}, Variant{"q8_0", "llama"},
                          Variant{"f16", "qwen2"}, Variant{"q4_1", "llama"}, Variant{"q5_0", "llama"},
                          Variant{"q5_1", "qwen2"}, Variant{"q2_k", "llama"}, Variant{"q3_k", "llama"},
                          Variant{"q5_k", "llama"}, Variant{"q4_k", "llama"}, Variant{"q6_k", "qwen2"},
                          Variant{"q4_k_m", "llama"}}) {
    const char* type = variant.type;
    const std::string t = type;
    const bool k_quant = t == "q2_k" || t == "q3_k" || t == "q5_k" || t == "q4_k" || t == "q6_k" || t == "q4_k_m";
    const bool blocks32 = t == "q8_0" || t == "q4_1" || t == "q5_0" || t == "q5_1";
    SynthOptions o;
    o.architecture = variant.architecture;
    o.n_embd = k_quant ? 256 : 96;
    o.n_layer = 2;
    o.n_head = k_quant ? 8 : 6;
    o.n_head_kv = 2;
    o.n_ff = k_quant ? 512 : blocks32 ? 160 : 200;
    o.n_vocab = 300;
    o.n_ctx = 256;
    o.type = type;
    o.seed = 42;
    const std::string path = test::temp_dir(std::string("synth-") + type + "-" + variant.architecture) + "/model.gguf";
    write_synth_model(o, path);
    auto model = Model::load(path);
    const auto tokens = prompt_for(*model, 45);
    const auto reference = test::reference_logits(*model, tokens);
    for (const Recipe recipe : {kDefaultRecipe, kQ8Recipe}) {
      const auto baseline = logits_of(model, tokens, 0, 1, Isa::Scalar, recipe);
      for (Isa isa : supported_isas())
        for (int threads : {1, 3})
          for (int64_t chunk : {1, 7, 0}) {
            const auto logits = logits_of(model, tokens, chunk, threads, isa, recipe);
            ASSERT_EQ(0, std::memcmp(logits.data(), baseline.data(), logits.size() * 4))
                << type << " " << recipe.name() << " isa " << isa_name(isa) << ", threads " << threads << ", chunk "
                << chunk;
          }
      double max_diff = 0, max_abs = 0;
      for (size_t i = 0; i < baseline.size(); ++i) {
        max_diff = std::max(max_diff, std::abs(double(baseline[i]) - reference[i]));
        max_abs = std::max(max_abs, std::abs(reference[i]));
      }
      // int8 activations: see AgreesWithDoublePrecisionReference.
      const bool integer_products = recipe.arithmetic == Arithmetic::Q8 && q8_applies(model->layers()[0].wq.type);
      EXPECT_LT(max_diff, integer_products ? 5e-2 * std::max(1.0, max_abs) : 1e-3)
          << type << " " << variant.architecture << " " << recipe.name();
    }
    EXPECT_EQ(model->config().qkv_bias, std::string(variant.architecture) == "qwen2");
  }
}

// `kvg synth --type q4_k_m` writes llama-quantize's Q4_K_M mix: Q6_K for the
// output head and for attn_v / ffn_down on the layers use_more_bits() picks
// (8 layers: 0, 3, 6, 7), Q4_K for every other matrix.
TEST(Forward, SynthQ4KMMixesTypesAsLlamaQuantize) {
  SynthOptions o;
  o.n_embd = 256;
  o.n_layer = 8;
  o.n_head = 4;
  o.n_head_kv = 2;
  o.n_ff = 512;
  o.n_vocab = 300;
  o.n_ctx = 64;
  o.type = "q4_k_m";
  const std::string path = test::temp_dir("synth-q4_k_m-mix") + "/model.gguf";
  write_synth_model(o, path);
  auto model = Model::load(path);
  EXPECT_EQ(model->output().type, WeightType::Q6_K);
  EXPECT_EQ(model->token_embedding().type, WeightType::Q4_K);
  for (int l = 0; l < o.n_layer; ++l) {
    const LayerWeights& w = model->layers()[size_t(l)];
    const WeightType more = (l == 0 || l == 3 || l == 6 || l == 7) ? WeightType::Q6_K : WeightType::Q4_K;
    EXPECT_EQ(w.wv.type, more) << "layer " << l;
    EXPECT_EQ(w.w_down.type, more) << "layer " << l;
    for (const WeightMatrix* m : {&w.wq, &w.wk, &w.wo, &w.w_gate, &w.w_up}) EXPECT_EQ(m->type, WeightType::Q4_K);
  }
}

TEST(Forward, RejectsOutOfVocabularyAndOverlongPrompts) {
  KVG_REQUIRE_TEST_DATA(test::kStories260K);
  auto model = Model::load(test::data_path(test::kStories260K));
  EngineOptions options;
  options.max_context = 8;
  Session session(model, options);
  const std::vector<int32_t> bad = {1, 512};
  try {
    session.forward(bad, LogitsFor::Last, nullptr);
    FAIL() << "out-of-vocabulary id accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("512"), std::string::npos);
  }
  const std::vector<int32_t> long_prompt(9, 5);
  try {
    session.forward(long_prompt, LogitsFor::Last, nullptr);
    FAIL() << "prompt longer than the context accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::OutOfRange);
  }
  EXPECT_EQ(session.n_past(), 0);
}

// EngineOptions::context_limit (kvg.max_context): the model's context_length
// bounds a session unless it is raised; past it the arithmetic is the same,
// so a prefill in one pass and one in chunks give the same bits there too.
TEST(Forward, AContextLimitLetsASessionReachPastTheTrainedContextExactly) {
  auto model = test::load_synth(test::small_synth_options(), "context_limit");  // trained on 128 positions
  std::vector<int32_t> tokens = {1};
  for (int32_t i = 1; i < 200; ++i) tokens.push_back(3 + (i * 37) % 290);
  EXPECT_EQ(positions_reached(*model, EngineOptions{}), 128);
  EXPECT_THROW(check_prompt_tokens(*model, tokens.size()), Error);
  Session bounded(model, EngineOptions{});
  EXPECT_THROW(bounded.prefill(tokens, 0, LogitsFor::Last, nullptr), Error);
  EngineOptions past;
  past.context_limit = 256;
  EXPECT_EQ(positions_reached(*model, past), 256);
  past.max_context = 300;  // a session's own reservation stays within the limit
  EXPECT_EQ(positions_reached(*model, past), 256);
  EXPECT_NO_THROW(check_prompt_tokens(*model, tokens.size(), past.context_limit));
  std::vector<float> whole, chunked;
  Session one_pass(model, past);
  one_pass.prefill(tokens, 0, LogitsFor::All, &whole);
  Session in_chunks(model, past);
  in_chunks.prefill(tokens, 48, LogitsFor::All, &chunked);
  ASSERT_EQ(whole.size(), chunked.size());
  EXPECT_EQ(std::memcmp(whole.data(), chunked.data(), whole.size() * sizeof(float)), 0);
  const std::vector<int32_t> too_long(257, 5);
  Session full(model, past);
  EXPECT_THROW(full.prefill(too_long, 0, LogitsFor::Last, nullptr), Error);
}

// A batch is one model, recipe and ISA, each session once, every request
// checked before any row is computed: a refused batch changes no session.
TEST(Forward, BatchedPassRefusesWhatCannotShareIt) {
  KVG_REQUIRE_TEST_DATA(test::kStories260K);
  auto model = Model::load(test::data_path(test::kStories260K));
  EngineOptions options;
  options.max_context = 8;
  Session a(model, options), b(model, options);
  options.recipe.kv = KvStorage::BF16;
  Session other_recipe(model, options);
  const std::vector<int32_t> ok = {1, 5}, bad = {1, 512}, too_long(9, 5);
  auto refused = [&](std::vector<ForwardRequest> requests, ErrorCode code, const char* says) {
    try {
      Session::forward_batch(requests);
      ADD_FAILURE() << "accepted: " << says;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  Session other_model(Model::load(test::data_path(test::kStories260K)), EngineOptions{});
  refused({{&a, ok}, {&other_model, ok}}, ErrorCode::InvalidArgument, "runs one model");
  refused({{&a, ok}, {&other_recipe, ok}}, ErrorCode::InvalidArgument, "one recipe and ISA: f32-portable-v1+kv-bf16");
  refused({{&a, ok}, {&a, ok}}, ErrorCode::InvalidArgument, "appears twice");
  refused({{&a, ok}, {&b, bad}}, ErrorCode::InvalidArgument, "512");
  std::vector<float> logits = {1.0f};
  refused({{&b, {}, LogitsFor::Last, &logits}, {&a, ok}, {&b, too_long}}, ErrorCode::OutOfRange, "exceeds the context length");
  EXPECT_EQ(a.n_past(), 0);
  EXPECT_EQ(b.n_past(), 0);
  EXPECT_EQ(logits, std::vector<float>{1.0f});  // a refused batch clears nothing
  Session::forward_batch(std::vector<ForwardRequest>{{&a, ok, LogitsFor::Last, nullptr}, {&b, {}, LogitsFor::Last, &logits}});
  EXPECT_EQ(a.n_past(), 2);
  EXPECT_TRUE(logits.empty());  // no tokens, no logits
}

}  // namespace
}  // namespace kvg

namespace kvg {
namespace {

// kvg.max_kv_memory / --max-kv-memory: a context whose KV cache would not fit
// is refused before it is allocated, with the bytes it needs in the message,
// and the session stays usable within the bound.
TEST(Forward, KvMemoryBoundRefusesBeforeAllocating) {
  KVG_REQUIRE_TEST_DATA(test::kStories260K);
  auto model = Model::load(test::data_path(test::kStories260K));
  const int64_t per_position = 2 * int64_t(model->config().n_layer) * model->config().kv_row_floats() * 4;
  EngineOptions options;
  options.max_kv_bytes = 10 * per_position;  // room for 10 positions
  options.kv_limit_name = "the test bound";
  Session session(model, options);
  const std::vector<int32_t> fits(10, 5), more(1, 5);
  session.forward(fits, LogitsFor::Last, nullptr);
  try {
    session.forward(more, LogitsFor::Last, nullptr);
    FAIL() << "a context beyond the KV bound was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::OutOfRange);
    const std::string message = e.what();
    EXPECT_NE(message.find("11 positions needs " + std::to_string(11 * per_position) + " bytes"), std::string::npos)
        << message;
    EXPECT_NE(message.find("the test bound = " + std::to_string(10 * per_position)), std::string::npos) << message;
  }
  EXPECT_EQ(session.n_past(), 10);
  EXPECT_EQ(session.kv_cache().bytes_for(1), per_position);
}

}  // namespace
}  // namespace kvg

namespace kvg {
namespace {

// One synthetic model per architecture family (kvg synth --arch ...), each
// with the features that family adds switched on and short enough windows
// and caps that they change the result within a 75-token prompt.
struct ArchVariant {
  const char* name;
  SynthOptions options;
};

void PrintTo(const ArchVariant& v, std::ostream* os) { *os << v.name; }

SynthOptions arch_options(const std::string& arch) {
  SynthOptions o = test::small_synth_options();
  o.architecture = arch;
  o.seed = 11;
  return o;
}

std::vector<ArchVariant> arch_variants() {
  std::vector<ArchVariant> v;
  SynthOptions llama3 = arch_options("llama");
  llama3.llama3_rope = true;
  v.push_back({"llama3_rope", llama3});
  SynthOptions linear = arch_options("llama");
  linear.rope_scale = 4;
  v.push_back({"llama_linear_rope", linear});
  v.push_back({"qwen3", arch_options("qwen3")});
  SynthOptions phi3 = arch_options("phi3");
  phi3.sliding_window = 40;
  v.push_back({"phi3", phi3});
  v.push_back({"gemma", arch_options("gemma")});
  SynthOptions gemma2 = arch_options("gemma2");
  gemma2.n_layer = 3;
  gemma2.sliding_window = 40;
  gemma2.attn_softcap = 1.5f;   // synthetic scores and logits are of order 1:
  gemma2.final_softcap = 2.0f;  // small caps make tanh bend them
  v.push_back({"gemma2", gemma2});
  SynthOptions gemma3 = arch_options("gemma3");
  gemma3.n_layer = 7;  // layers 0-4 and 6 slide, layer 5 is global
  gemma3.sliding_window = 40;
  gemma3.rope_base = 1000000;
  gemma3.rope_scale = 8;  // global layers only
  v.push_back({"gemma3", gemma3});
  v.push_back({"starcoder2", arch_options("starcoder2")});
  return v;
}

class ArchitectureModel : public ::testing::TestWithParam<ArchVariant> {
 protected:
  void SetUp() override { model_ = test::load_synth(GetParam().options, std::string("arch-") + GetParam().name); }
  std::shared_ptr<const Model> model_;
};

TEST_P(ArchitectureModel, AgreesWithDoublePrecisionReferenceRowByRow) {
  const auto tokens = prompt_for(*model_, 75);
  const auto ours = logits_of(model_, tokens, 0, 1, Isa::Scalar);
  const auto reference = test::reference_logits(*model_, tokens);
  ASSERT_EQ(ours.size(), reference.size());
  const size_t n_vocab = size_t(model_->config().n_vocab);
  for (size_t row = 0; row < tokens.size(); ++row) {
    double max_diff = 0, max_abs = 0;
    for (size_t i = row * n_vocab; i < (row + 1) * n_vocab; ++i) {
      max_diff = std::max(max_diff, std::abs(double(ours[i]) - reference[i]));
      max_abs = std::max(max_abs, std::abs(reference[i]));
    }
    ASSERT_LT(max_diff, 1e-5 * max_abs) << "position " << row << ", largest |logit| " << max_abs;
  }
}

TEST_P(ArchitectureModel, BitwiseInvariantAcrossChunksThreadsAndIsa) {
  const auto tokens = prompt_for(*model_, 75);
  const auto baseline = logits_of(model_, tokens, 0, 1, Isa::Scalar);
  for (Isa isa : supported_isas())
    for (int threads : {1, 3})
      for (int64_t chunk : {1, 7, 32, 0}) {
        const auto logits = logits_of(model_, tokens, chunk, threads, isa);
        ASSERT_EQ(0, std::memcmp(logits.data(), baseline.data(), logits.size() * 4))
            << "isa " << isa_name(isa) << ", threads " << threads << ", chunk " << chunk;
      }
}

// The features are really on: each family's configuration as loaded.
TEST_P(ArchitectureModel, BatchedPassesEqualEachSessionAlone) {
  expect_batched_equals_alone(model_, kDefaultRecipe, 2, 3);
}

TEST_P(ArchitectureModel, LoadsWithItsFamilysFeatures) {
  const ModelConfig& c = model_->config();
  const std::string name = GetParam().name;
  EXPECT_EQ(!c.rope_freq_factors.empty(), name == "llama3_rope");
  EXPECT_EQ(c.qk_norm, name == "qwen3" || name == "gemma3");
  EXPECT_EQ(c.post_norms, name == "gemma2" || name == "gemma3");
  EXPECT_EQ(c.embed_scale, name.rfind("gemma", 0) == 0);
  EXPECT_EQ(c.layer_norm, name == "starcoder2");
  EXPECT_EQ(c.gated_ffn, name != "starcoder2");
  EXPECT_EQ(c.qkv_bias, name == "starcoder2");
  EXPECT_EQ(c.sliding_window, name == "phi3" || name == "gemma2" || name == "gemma3" ? 40 : 0);
  EXPECT_EQ(c.attn_softcap, name == "gemma2" ? 1.5f : 0.0f);
  if (name == "gemma3") {
    EXPECT_FALSE(c.layer_slides(5));
    EXPECT_TRUE(c.layer_slides(4) && c.layer_slides(6));
    EXPECT_EQ(c.rope_freq_scale, 1.0 / 8);
  }
  if (name == "gemma2") {
    EXPECT_TRUE(c.layer_slides(0) && !c.layer_slides(1) && c.layer_slides(2));
  }
  if (name == "llama3_rope") {  // factors 1 (short wavelengths) up to 8 (long ones)
    EXPECT_EQ(c.rope_freq_factors.front(), 1.0f);
    EXPECT_EQ(c.rope_freq_factors.back(), 8.0f);
  }
}

// Golden hashes of the logits of a fixed prompt on each family's synthetic
// model (docs/design.md, recipe rule 6).
TEST_P(ArchitectureModel, GoldenLogitsHash) {
  static const std::map<std::string, std::string> kGolden = {
      {"llama3_rope", "bf59d45b716b14de764e912606ef734cd3d2e9427ede42623df314c292c90c2d"},
      {"llama_linear_rope", "89bf7cd7051eaefcee45863f8b96b4087b013701b343ca6d9b9faf8a860eb3d6"},
      {"qwen3", "94cde128d72fe396462e62ca916ba35a77a8fac989c9307e0a6267ad0f11745c"},
      {"phi3", "ea50802d127a6ea13ac8cffb6d31a057657c6f2c242c175cc6e686df050cf17f"},
      {"gemma", "84aac966075031b03a9adbc1f7171f5b84cdcef6a888a3ae29160e77fb994039"},
      {"gemma2", "6989fe7550f1a4e52e02c6e2bdac930bbf12c578c6c2ba93c4d64113a13ae422"},
      {"gemma3", "5045cfd7e29ac63b393ad7e861a39d918c29655984bcba2d0f354f242f75e9c5"},
      {"starcoder2", "b28f01a712e00d15ffbed7a2f7f8a2b286e6c31bed4fd591bd78ea9798718d65"},
  };
  EXPECT_EQ(hash_of(logits_of(model_, prompt_for(*model_, 75), 0, 1, default_isa())), kGolden.at(GetParam().name));
}

// Llama 3.1's frequency factors change the logits (the silent difference
// issue 9 found): the same weights without rope_freqs.weight give other
// numbers, and each file agrees with the reference on its own.
TEST(Forward, Llama3RopeFactorsChangeTheLogits) {
  SynthOptions with = arch_options("llama");
  with.llama3_rope = true;
  auto scaled = test::load_synth(with, "llama3-factors");
  auto plain = test::load_synth(arch_options("llama"), "llama3-plain");
  const auto tokens = prompt_for(*plain, 75);
  const auto a = logits_of(scaled, tokens, 0, 1, Isa::Scalar), b = logits_of(plain, tokens, 0, 1, Isa::Scalar);
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(double(a[i]) - double(b[i])));
    max_abs = std::max(max_abs, std::abs(double(b[i])));
  }
  EXPECT_GT(max_diff, 1e-3 * max_abs);
  // The first position has angle 0 everywhere: identical there.
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), size_t(plain->config().n_vocab) * 4));
}

INSTANTIATE_TEST_SUITE_P(Families, ArchitectureModel, ::testing::ValuesIn(arch_variants()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace kvg
