// What a generation may be asked beyond its tokens (engine/generate.hpp):
// several continuations of one prompt, and the logits rows of its prompt
// positions. A graft check asks both, in a backend and in the engine worker
// (engine/graft_check.hpp), so both must be the bits the plain ways give:
// each continuation a fresh generation of its seed, each row the row one
// monolithic pass computes, at every chunk size, alone or in a batch.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "common/error.hpp"
#include "engine/generate.hpp"
#include "engine/session.hpp"
#include "tests/support/data_paths.hpp"

namespace kvg {
namespace {

std::vector<int32_t> story_prompt(int n) {
  std::vector<int32_t> prompt = {1};
  for (int i = 1; i < n; ++i) prompt.push_back(3 + (i * 37) % 500);
  return prompt;
}

GenerateOptions sampled(int64_t max_new_tokens, uint64_t seed) {
  GenerateOptions options;
  options.max_new_tokens = max_new_tokens;
  options.sampling.temperature = 0.9f;
  options.sampling.seed = seed;
  options.stop_at_eos = false;
  return options;
}

// Runs `g` to its end, stepped together with `beside` (another session's
// generation, which joins every pass while it lasts).
void run_beside(Generation& g, Generation& beside) {
  while (!g.finished()) {
    std::vector<Generation*> pass = {&beside, &g};
    step_together(pass);
  }
}

// Each continuation is the generation a fresh session gives with its seed,
// also when the context ends them early (each then as long as the others).
TEST(GenerationAsks, ContinuationsEachEqualAFreshGenerationOfTheirSeed) {
  KVG_REQUIRE_TEST_DATA(test::kTinyStories656K);
  const auto model = Model::load(test::data_path(test::kTinyStories656K));
  const std::vector<int32_t> prompt = story_prompt(20);
  for (const int64_t max_context : {int64_t(0), int64_t(24)}) {
    EngineOptions engine;
    engine.threads = 2;
    engine.max_context = max_context;
    GenerateOptions options = sampled(10, 7);
    options.prefill_chunk = 6;
    options.continuations = 3;
    Session session(model, engine);
    const GenerateResult all = generate(session, prompt, options);
    std::vector<int32_t> expected;
    for (uint64_t i = 0; i < 3; ++i) {
      Session fresh(model, engine);
      const auto one = generate(fresh, prompt, sampled(10, 7 + i)).tokens;
      expected.insert(expected.end(), one.begin(), one.end());
      EXPECT_EQ(one.size(), max_context ? 5u : 10u) << "max_context " << max_context;
    }
    EXPECT_EQ(all.tokens, expected) << "max_context " << max_context;
    EXPECT_FALSE(all.stopped_at_eos);
  }
}

TEST(GenerationAsks, ContinuationsSteppedBesideAnotherGenerationAreTheSameTokens) {
  KVG_REQUIRE_TEST_DATA(test::kTinyStories656K);
  const auto model = Model::load(test::data_path(test::kTinyStories656K));
  const std::vector<int32_t> prompt = story_prompt(17);
  GenerateOptions options = sampled(6, 3);
  options.continuations = 4;
  Session alone(model, EngineOptions{});
  const auto expected = generate(alone, prompt, options).tokens;
  Session session(model, EngineOptions{}), other(model, EngineOptions{});
  Generation g(session, prompt, options);
  Generation beside(other, story_prompt(9), sampled(40, 11));
  run_beside(g, beside);
  EXPECT_EQ(g.result().tokens, expected);
  EXPECT_EQ(g.result().tokens.size(), 24u);
}

TEST(GenerationAsks, SeveralContinuationsThatAStopCouldEndAreRefused) {
  KVG_REQUIRE_TEST_DATA(test::kStories260K);
  const auto model = Model::load(test::data_path(test::kStories260K));
  Session session(model, EngineOptions{});
  GenerateOptions options = sampled(4, 0);
  options.continuations = 2;
  options.stop_at_eos = true;
  EXPECT_THROW(Generation(session, story_prompt(5), options), Error);
  options.stop_at_eos = false;
  options.stop_tokens = {13};
  EXPECT_THROW(Generation(session, story_prompt(5), options), Error);
  options.stop_tokens.clear();
  options.continuations = 0;
  EXPECT_THROW(Generation(session, story_prompt(5), options), Error);
  options.continuations = 1;
  options.prompt_logits_from = 2;  // and nowhere to hand the rows
  EXPECT_THROW(Generation(session, story_prompt(5), options), Error);
  EXPECT_EQ(session.n_past(), 0);
}

// The rows from a position on are the bytes of one monolithic pass's rows,
// whatever the chunks (one before the position, one across it, one from
// it), alone or beside another generation; and the tokens decoded after
// them are those of a generation that asked for no rows.
TEST(GenerationAsks, PromptLogitsRowsAreTheMonolithicPassRowsAtEveryChunkSize) {
  KVG_REQUIRE_TEST_DATA(test::kTinyStories656K);
  const auto model = Model::load(test::data_path(test::kTinyStories656K));
  const size_t n_vocab = size_t(model->config().n_vocab);
  const std::vector<int32_t> prompt = story_prompt(30);
  constexpr int64_t kFrom = 12;
  Session monolithic(model, EngineOptions{});
  std::vector<float> all;
  monolithic.forward(prompt, LogitsFor::All, &all);
  const std::vector<float> expected(all.begin() + std::ptrdiff_t(kFrom * n_vocab), all.end());
  Session plain(model, EngineOptions{});
  const auto expected_tokens = generate(plain, prompt, sampled(5, 2)).tokens;

  for (const int64_t chunk : {0, 1, 5, 12, 13}) {
    for (const bool batched : {false, true}) {
      std::vector<float> rows;
      GenerateOptions options = sampled(5, 2);
      options.prefill_chunk = chunk;
      options.prompt_logits_from = kFrom;
      options.prompt_logits = [&rows](std::span<const float> r) { rows.insert(rows.end(), r.begin(), r.end()); };
      Session session(model, EngineOptions{}), other(model, EngineOptions{});
      Generation g(session, prompt, options);
      Generation beside(other, story_prompt(23), sampled(30, 5));
      if (batched) {
        run_beside(g, beside);
      } else {
        Generation* one[1] = {&g};
        while (!g.finished()) step_together(one);
      }
      ASSERT_EQ(rows.size(), expected.size()) << "chunk " << chunk << " batched " << batched;
      EXPECT_EQ(std::memcmp(rows.data(), expected.data(), expected.size() * sizeof(float)), 0)
          << "chunk " << chunk << " batched " << batched;
      EXPECT_EQ(g.result().tokens, expected_tokens) << "chunk " << chunk << " batched " << batched;
    }
  }
}

}  // namespace
}  // namespace kvg
