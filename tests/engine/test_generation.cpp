// Generations stepped together (engine/generate.hpp: step_together, what the
// engine worker runs) against each generation run alone by generate(): the
// same tokens, whatever joins, waits or finishes around them.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "common/error.hpp"
#include "engine/generate.hpp"
#include "engine/graft.hpp"
#include "engine/session.hpp"
#include "storage/byte_stream.hpp"
#include "tests/support/data_paths.hpp"
#include "tests/support/stepped_generations.hpp"

namespace kvg {
namespace {

using Job = test::SteppedJob;

Job random_job(std::mt19937& rng, int n_vocab) {
  Job job;
  const int length = 1 + int(rng() % 60);
  job.prompt.push_back(1);
  for (int i = 1; i < length; ++i) job.prompt.push_back(3 + int(rng() % uint32_t(n_vocab - 3)));
  job.options.max_new_tokens = 1 + int(rng() % 24);
  job.options.prefill_chunk = rng() % 3 == 0 ? 0 : 1 + int(rng() % 17);
  job.options.stop_at_eos = rng() % 2 == 0;
  if (rng() % 2 == 0) {  // sampled, not greedy: the position-seeded sampler must see the same positions
    job.options.sampling.temperature = 0.9f;
    job.options.sampling.seed = rng();
  }
  job.joins_at = int(rng() % 12);
  return job;
}

std::vector<int32_t> alone(const std::shared_ptr<const Model>& model, const EngineOptions& engine, const Job& job) {
  Session session(model, engine);
  return generate(session, job.prompt, job.options).tokens;
}

// `jobs` started at their steps; at each step every running one takes part
// with probability 3/4, in a random order (whoever leads the pass).
std::vector<std::vector<int32_t>> together(const std::shared_ptr<const Model>& model, const EngineOptions& engine,
                                           const std::vector<Job>& jobs, std::mt19937& rng) {
  std::vector<std::unique_ptr<Session>> sessions;
  for (size_t i = 0; i < jobs.size(); ++i) sessions.push_back(std::make_unique<Session>(model, engine));
  return test::step_jobs_together(
      sessions, jobs, [&](size_t, int) { return rng() % 4 != 0; },
      [&](std::vector<Generation*>& pass) { std::shuffle(pass.begin(), pass.end(), rng); });
}

// `shared_pool`: the sessions stepped together run on one pool, as the
// engine worker's do (EngineOptions::pool); each alone on a pool of its own.
void expect_together_equals_alone(const char* path, Recipe recipe, int threads, uint32_t seed,
                                  bool shared_pool = false) {
  KVG_REQUIRE_TEST_DATA(path);
  const auto model = Model::load(test::data_path(path));
  EngineOptions engine;
  engine.recipe = recipe;
  engine.threads = threads;
  EngineOptions stepped = engine;
  if (shared_pool) stepped.pool = std::make_shared<ThreadPool>(threads);
  std::mt19937 rng(seed);
  for (int round = 0; round < 4; ++round) {
    std::vector<Job> jobs;
    for (int i = 0; i < 6; ++i) jobs.push_back(random_job(rng, model->config().n_vocab));
    const auto batched = together(model, stepped, jobs, rng);
    for (size_t i = 0; i < jobs.size(); ++i)
      EXPECT_EQ(batched[i], alone(model, engine, jobs[i]))
          << path << " " << recipe.name() << " threads " << threads << " round " << round << " job " << i;
  }
}

TEST(Generation, SteppedTogetherEqualsEachAlone) {
  expect_together_equals_alone(test::kStories260K, kDefaultRecipe, 2, 5);
  expect_together_equals_alone(test::kTinyStories656K, kDefaultRecipe, 1, 6);
  expect_together_equals_alone(test::kTinyStories656K, Recipe{Arithmetic::Q8, KvStorage::F32}, 2, 7);
  expect_together_equals_alone(test::kTinyStories656K, Recipe{Arithmetic::Q8, KvStorage::I8}, 3, 8);
}

TEST(Generation, SessionsSharingOnePoolEqualEachAloneOnItsOwn) {
  expect_together_equals_alone(test::kStories260K, kDefaultRecipe, 2, 9, true);
  expect_together_equals_alone(test::kTinyStories656K, Recipe{Arithmetic::Q8, KvStorage::F32}, 3, 10, true);
}

TEST(Generation, ASharedPoolOfOtherThreadsThanTheSessionAsksIsRefused) {
  KVG_REQUIRE_TEST_DATA(test::kStories260K);
  const auto model = Model::load(test::data_path(test::kStories260K));
  EngineOptions engine;
  engine.threads = 2;
  engine.pool = std::make_shared<ThreadPool>(3);
  EXPECT_THROW(Session(model, engine), Error);
  engine.pool = std::make_shared<ThreadPool>(2);
  EXPECT_NO_THROW(Session(model, engine));
}

// A prompt the cache already holds whole (a whole-prompt graft) gets its last
// token evaluated again, as generate() does.
TEST(Generation, WholeCachedPromptEvaluatesItsLastTokenAgain) {
  KVG_REQUIRE_TEST_DATA(test::kStories260K);
  const auto model = Model::load(test::data_path(test::kStories260K));
  const std::vector<int32_t> prompt = {1, 400, 28, 99, 7};
  GenerateOptions options;
  options.max_new_tokens = 8;
  Session fresh(model, EngineOptions{});
  const auto expected = generate(fresh, prompt, options).tokens;
  Session cached(model, EngineOptions{});
  cached.prefill(prompt, 0, LogitsFor::None, nullptr);
  Generation g(cached, {}, options);
  EXPECT_EQ(g.prompt_tokens(), 1);
  while (!g.finished()) {
    Generation* one[1] = {&g};
    step_together(one);
  }
  EXPECT_EQ(g.result().tokens, expected);
}

// A generation of no new tokens is a capture (kvg_capture, a learned entry's
// prompt, in the engine worker): it prefills in chunks, asks no pass for
// logits, decodes nothing, and leaves the KV a plain prefill leaves, byte
// for byte as an artifact.
TEST(Generation, OfNoNewTokensPrefillsWithoutLogitsAndCapturesTheSameKv) {
  KVG_REQUIRE_TEST_DATA(test::kStories260K);
  const auto model = Model::load(test::data_path(test::kStories260K));
  const std::vector<int32_t> prompt = {1, 400, 28, 99, 7, 310, 41, 5, 77, 12, 250};
  GenerateOptions options;
  options.max_new_tokens = 0;
  options.prefill_chunk = 3;
  Session stepped(model, EngineOptions{});
  Generation g(stepped, prompt, options);
  int passes = 0;
  while (!g.finished()) {
    const ForwardRequest part = g.next();
    EXPECT_EQ(part.which, LogitsFor::None) << "pass " << passes;
    stepped.forward(part.tokens, part.which, part.logits);
    g.advance();
    ++passes;
  }
  EXPECT_EQ(passes, 4);
  EXPECT_TRUE(g.result().tokens.empty());
  Session prefilled(model, EngineOptions{});
  prefilled.prefill(prompt, 0, LogitsFor::None, nullptr);
  MemorySink a, b;
  EXPECT_EQ(capture(stepped, 0, int64_t(prompt.size()), std::nullopt, a),
            capture(prefilled, 0, int64_t(prompt.size()), std::nullopt, b));
  EXPECT_EQ(a.bytes(), b.bytes());
}

TEST(Generation, RefusesBadTokensBeforeAnyPass) {
  KVG_REQUIRE_TEST_DATA(test::kStories260K);
  const auto model = Model::load(test::data_path(test::kStories260K));
  Session session(model, EngineOptions{});
  const std::vector<int32_t> prompt = {1, 5, model->config().n_vocab};
  EXPECT_THROW(Generation(session, prompt, GenerateOptions{}), Error);
  EXPECT_EQ(session.n_past(), 0);
  EXPECT_THROW(Generation(session, {}, GenerateOptions{}), Error);
}

}  // namespace
}  // namespace kvg
