// How close each recipe's logits are to exact arithmetic: every recipe of
// all_recipes() against the independent fp64 forward pass
// (tests/support/reference_forward.hpp), on the two trained test models and on
// synthetic models of the quantized formats the integer recipe changes.
//
// Each recipe is exact against itself (the bitwise tests elsewhere); this is
// what it costs in fidelity. The test prints one table row per model and
// recipe (docs/recipe.md quotes it) and bounds each family loosely enough to
// hold for any correct implementation, tightly enough that a wrong scale,
// rounding rule or block order (errors of order 1) fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "engine/prompt.hpp"
#include "engine/session.hpp"
#include "tests/support/data_paths.hpp"
#include "tests/support/logit_compare.hpp"
#include "tests/support/reference_forward.hpp"
#include "tests/support/synth_fixture.hpp"

namespace kvg {
namespace {

constexpr const char* kStory =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine. One day, "
    "she saw a big, red ball in the park. She ran to it and kicked it high into the sky. The ball flew over the "
    "trees and landed in a pond. Lily was sad, but then a friendly duck swam to the ball and pushed it back.";

struct Fidelity {
  double max_error = 0;  // largest |logit - fp64| over every row, relative to the largest |fp64 logit|
  double mean_kl = 0;    // mean over rows of KL(fp64 softmax || recipe softmax), in nats
  double argmax = 0;     // share of rows whose argmax equals the fp64 argmax
};

Fidelity measure(const std::vector<float>& ours, const std::vector<double>& ref, int n_vocab) {
  Fidelity f;
  double max_abs = 0;
  const size_t rows = ref.size() / size_t(n_vocab);
  for (size_t row = 0; row < rows; ++row) {
    const float* o = &ours[row * size_t(n_vocab)];
    const double* r = &ref[row * size_t(n_vocab)];
    const size_t r_arg = size_t(std::max_element(r, r + n_vocab) - r);
    const size_t o_arg = size_t(std::max_element(o, o + n_vocab) - o);
    for (int v = 0; v < n_vocab; ++v) {
      f.max_error = std::max(f.max_error, std::abs(double(o[v]) - r[v]));
      max_abs = std::max(max_abs, std::abs(r[v]));
    }
    const double kl = test::kl_divergence(test::log_softmax(r, n_vocab), test::log_softmax(o, n_vocab));
    f.mean_kl += kl / double(rows);
    f.argmax += (r_arg == o_arg ? 1.0 : 0.0) / double(rows);
  }
  f.max_error /= std::max(1.0, max_abs);
  return f;
}

std::vector<float> logits_under(std::shared_ptr<const Model> model, const Recipe& recipe,
                                const std::vector<int32_t>& tokens) {
  EngineOptions options;
  options.recipe = recipe;
  options.threads = 2;
  Session session(std::move(model), options);
  std::vector<float> logits;
  session.prefill(tokens, 0, LogitsFor::All, &logits);
  return logits;
}

// The loose bound each recipe must meet (see the header comment).
struct Bound {
  double max_error, mean_kl, argmax;
};
Bound bound_for(const Recipe& r) {
  if (r == kDefaultRecipe) return {1e-4, 1e-8, 0.99};
  // Measured worst (int8 KV on stories260K, head_dim 8): 0.071, 0.0027 nats, 95 %.
  return {0.15, 0.01, 0.9};
}

void check_model(const std::string& label, std::shared_ptr<const Model> model, const std::vector<int32_t>& tokens) {
  const std::vector<double> ref = test::reference_logits(*model, tokens);
  const int n_vocab = model->config().n_vocab;
  for (const Recipe& recipe : all_recipes()) {
    const Fidelity f = measure(logits_under(model, recipe, tokens), ref, n_vocab);
    std::printf("| %s | %s | %.3g | %.3g | %.1f %% |\n", label.c_str(), recipe.name().c_str(), f.max_error, f.mean_kl,
                100 * f.argmax);
    const Bound b = bound_for(recipe);
    EXPECT_LT(f.max_error, b.max_error) << label << " " << recipe.name();
    EXPECT_LT(f.mean_kl, b.mean_kl) << label << " " << recipe.name();
    EXPECT_GE(f.argmax, b.argmax) << label << " " << recipe.name();
  }
}

TEST(Fidelity, TrainedModelsAgainstDoublePrecision) {
  std::printf("| model | recipe | max error / max logit | mean KL (nats) | argmax = fp64 |\n|---|---|---:|---:|---:|\n");
  for (const char* rel : {"models/stories260K.gguf", "models/TinyStories-656K-Q8_0.gguf"}) {
    KVG_REQUIRE_TEST_DATA(rel);
    auto model = Model::load(test::data_path(rel));
    check_model(rel, model, fresh_prompt(*model, kStory));
  }
}

// (Every format kvg synth writes; Q4_0 has no writer, its q8 products are
// checked at kernel level in tests/kernels/test_matmul_q8.cpp.)
TEST(Fidelity, QuantizedSynthModelsAgainstDoublePrecision) {
  for (const char* type : {"q8_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"}) {
    SynthOptions o = test::small_synth_options();
    o.n_embd = 256;  // room for whole 256-element K-quant blocks
    o.n_head = 4;
    o.n_ff = 512;
    o.type = type;
    auto model = test::load_synth(o, std::string("fidelity-") + type);
    std::vector<int32_t> tokens = {1};
    for (int i = 1; i < 60; ++i) tokens.push_back(3 + (i * 7919) % (o.n_vocab - 3));
    check_model(std::string("synth ") + type, model, tokens);
  }
}

// The integer recipe changes products with quantized matrices only: on a
// model without any, its logits are f32-portable-v1's, bit for bit.
TEST(Fidelity, IntegerRecipeIsTheFloatRecipeOnAnF32Model) {
  KVG_REQUIRE_TEST_DATA("models/stories260K.gguf");
  auto model = Model::load(test::data_path("models/stories260K.gguf"));
  const auto tokens = fresh_prompt(*model, kStory);
  const auto f32 = logits_under(model, kDefaultRecipe, tokens);
  const auto q8 = logits_under(model, Recipe{Arithmetic::Q8, KvStorage::F32}, tokens);
  ASSERT_EQ(f32.size(), q8.size());
  EXPECT_EQ(0, std::memcmp(f32.data(), q8.data(), f32.size() * 4));
}

}  // namespace
}  // namespace kvg
