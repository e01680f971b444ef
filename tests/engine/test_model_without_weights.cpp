// A model loaded to prepare calls only (Model::load_without_weights: a
// backend whose generations run in the engine worker): the same checks, the
// same configuration, tokenizer, fingerprint and counts as a full load, no
// mapping left in the process, and no Session built from it.
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "engine/model.hpp"
#include "engine/session.hpp"
#include "tests/support/data_paths.hpp"

namespace kvg {
namespace {

// Whether this process maps `path` now.
bool maps(const std::string& path) {
  std::ifstream in("/proc/self/maps");
  std::stringstream all;
  all << in.rdbuf();
  return all.str().find(path) != std::string::npos;
}

TEST(ModelWithoutWeights, KeepsWhatCallsArePreparedWithAndMapsNothing) {
  KVG_REQUIRE_TEST_DATA(test::kStories260K);
  const std::string path = test::data_path(test::kStories260K);
  const auto full = Model::load(path);
  EXPECT_TRUE(full->has_weights());
  EXPECT_TRUE(maps(path));
  const auto light = Model::load_without_weights(path, full->fingerprint());
  EXPECT_FALSE(light->has_weights());
  EXPECT_EQ(light->fingerprint(), full->fingerprint());
  EXPECT_EQ(light->config().n_ctx, full->config().n_ctx);
  EXPECT_EQ(light->config().n_layer, full->config().n_layer);
  EXPECT_EQ(light->config().kv_row_floats(), full->config().kv_row_floats());
  EXPECT_EQ(light->parameter_count(), full->parameter_count());
  EXPECT_EQ(light->weight_bytes(), full->weight_bytes());
  const std::string text = "Once upon a time, Lily saw a big red ball.";
  EXPECT_EQ(light->tokenizer().encode_with_bos(text), full->tokenizer().encode_with_bos(text));
  EXPECT_TRUE(light->weights_intact());
  EXPECT_NO_THROW(light->check_weights_intact());
  EXPECT_THROW(Session(light, EngineOptions{}), Error);
}

TEST(ModelWithoutWeights, LeavesNoMappingBehind) {
  KVG_REQUIRE_TEST_DATA(test::kStories260K);
  const std::string path = test::data_path(test::kStories260K);
  ASSERT_FALSE(maps(path)) << "an earlier test left the model mapped";
  const auto light = Model::load_without_weights(path);  // its fingerprint computed, then let go
  EXPECT_FALSE(maps(path));
  EXPECT_EQ(light->fingerprint(), Model::load(path)->fingerprint());
}

TEST(ModelWithoutWeights, RefusesWhatAFullLoadRefuses) {
  const std::string missing = test::temp_dir("without_weights") + "/missing.gguf";
  EXPECT_THROW(Model::load_without_weights(missing), Error);
}

}  // namespace
}  // namespace kvg
