// A pass too small to gain from threads runs inline (engine/pass_threads.hpp):
// the thresholds, the work a pass is counted as, which passes reach the pool,
// and that the bits are the pool's either way.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/pass_threads.hpp"
#include "engine/session.hpp"
#include "tests/support/data_paths.hpp"

namespace kvg {
namespace {

TEST(PassThreads, EitherThresholdReachedPaysForThreads) {
  EXPECT_FALSE(pass_pays_for_threads(kThreadedPassWeightBytes - 1, kThreadedPassMacs - 1));
  EXPECT_TRUE(pass_pays_for_threads(kThreadedPassWeightBytes, 0));
  EXPECT_TRUE(pass_pays_for_threads(0, kThreadedPassMacs));
}

std::vector<int32_t> prompt_of(int n) {
  std::vector<int32_t> tokens{1};
  for (int i = 1; i < n; ++i) tokens.push_back(3 + (i * 37) % 500);
  return tokens;
}

TEST(PassThreads, APassCountsEveryRowThroughEveryParameterAndItsAttention) {
  const auto model = Model::load(test::data_path(test::kTinyStories656K));
  const ModelConfig& c = model->config();
  const uint64_t per_position = 2 * uint64_t(c.n_layer) * uint64_t(c.n_head) * uint64_t(c.head_dim);
  Session session(model, EngineOptions{});
  const std::vector<int32_t> tokens = prompt_of(5);
  const ForwardRequest first{&session, tokens, LogitsFor::None, nullptr};
  EXPECT_EQ(pass_macs(*model, {&first, 1}), 5 * model->parameter_count() + (1 + 2 + 3 + 4 + 5) * per_position);
  session.forward(tokens, LogitsFor::None, nullptr);
  const std::vector<int32_t> next{42, 43};
  const ForwardRequest second{&session, next, LogitsFor::None, nullptr};
  const ForwardRequest both[] = {second, second};  // two parts, each counted at its own positions
  EXPECT_EQ(pass_macs(*model, {both, 2}), 2 * (2 * model->parameter_count() + (6 + 7) * per_position));
}

struct PassRun {
  std::vector<float> prefill_logits, decode_logits;
  uint64_t jobs_in_prefill = 0, jobs_in_decode = 0;
  int threads_started = 0;
};

// A prompt of `prompt` tokens in one pass, then 8 one-token passes, on a
// shared pool of 2 threads; how many jobs each part handed to the pool.
PassRun run_on_pool(int prompt, bool small_passes_inline) {
  const auto model = Model::load(test::data_path(test::kTinyStories656K));
  EngineOptions options;
  options.threads = 2;
  options.pool = std::make_shared<ThreadPool>(2);
  options.small_passes_inline = small_passes_inline;
  Session session(model, options);
  PassRun run;
  const uint64_t before = options.pool->jobs_dispatched();
  session.forward(prompt_of(prompt), LogitsFor::Last, &run.prefill_logits);
  run.jobs_in_prefill = options.pool->jobs_dispatched() - before;
  std::vector<float> logits;
  for (int32_t token = 10; token < 18; ++token) {
    session.forward(std::vector<int32_t>{token}, LogitsFor::Last, &logits);
    run.decode_logits.insert(run.decode_logits.end(), logits.begin(), logits.end());
  }
  run.jobs_in_decode = options.pool->jobs_dispatched() - before - run.jobs_in_prefill;
  run.threads_started = options.pool->started();
  return run;
}

TEST(PassThreads, SmallPassesRunInlineAndLargeOnesOnThePoolWithThePoolsBits) {
  const auto model = Model::load(test::data_path(test::kTinyStories656K));
  // 656K parameters: a 256-token prompt is past the multiply-add threshold
  // (weights alone are far below the byte threshold), one token is not.
  ASSERT_LT(model->weight_bytes(), kThreadedPassWeightBytes);
  ASSERT_GE(256 * model->parameter_count(), kThreadedPassMacs);
  const PassRun inline_small = run_on_pool(256, true);
  const PassRun pooled = run_on_pool(256, false);
  EXPECT_GT(inline_small.jobs_in_prefill, 0u);
  EXPECT_EQ(inline_small.jobs_in_decode, 0u);
  EXPECT_GT(pooled.jobs_in_decode, 0u);
  EXPECT_EQ(inline_small.prefill_logits, pooled.prefill_logits);
  EXPECT_EQ(inline_small.decode_logits, pooled.decode_logits);
  const PassRun short_prompt = run_on_pool(16, true);
  EXPECT_EQ(short_prompt.jobs_in_prefill, 0u);
  EXPECT_EQ(short_prompt.threads_started, 0) << "a pool never handed a job starts no thread";
  EXPECT_EQ(inline_small.threads_started, 1);
}

}  // namespace
}  // namespace kvg
