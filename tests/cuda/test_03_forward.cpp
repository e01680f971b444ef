// Whole models on the GPU, per family and weight format (GPU only): the
// logits SHA-256 and the KV equal the CPU's for every chunking.
#include "tests/cuda/fixtures.hpp"

#include <algorithm>

#include "engine/sampler.hpp"

namespace kvg {
namespace {

using namespace cuda_test;

void expect_gpu_equals_cpu(std::shared_ptr<const Model> model, const std::vector<int32_t>& tokens, const std::string& label,
                           const Recipe& recipe = kDefaultRecipe) {
  const Evaluation cpu = cpu_run(model, tokens, 0, recipe);
  CudaForward gpu(model, model->config().n_ctx, recipe);
  for (int64_t chunk : {int64_t(1), int64_t(7), int64_t(0)}) {
    const Evaluation run = gpu_run(gpu, *model, tokens, chunk);
    ASSERT_EQ(run.logits.size(), cpu.logits.size());
    EXPECT_EQ(logits_sha256(run.logits), logits_sha256(cpu.logits)) << label << ", chunk " << chunk;
    EXPECT_TRUE(same_kv(*run.cache, *cpu.cache, int64_t(tokens.size()))) << label << ", chunk " << chunk << ": KV differs";
  }
}

class CudaOnSharedModel : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaOnSharedModel, LogitsHashAndKvEqualCpuForEveryChunking) {
  KVG_REQUIRE_GPU();
  KVG_REQUIRE_TEST_DATA(GetParam());
  auto model = Model::load(test::data_path(GetParam()));
  expect_gpu_equals_cpu(model, prompt_for(*model, 70), GetParam());
}

TEST_P(CudaOnSharedModel, GreedyDecodeEqualsCpu) {
  KVG_REQUIRE_GPU();
  KVG_REQUIRE_TEST_DATA(GetParam());
  auto model = Model::load(test::data_path(GetParam()));
  Session cpu(model, EngineOptions{});
  CudaForward gpu(model, cpu.max_context());
  KvCache cache(model->config().n_layer, model->config().kv_row_floats(), cpu.max_context());
  std::vector<float> cpu_logits, gpu_logits;
  std::vector<int32_t> tokens = {1};
  cpu.forward(tokens, LogitsFor::Last, &cpu_logits);
  gpu.forward(tokens, 0, LogitsFor::Last, &gpu_logits, cache);
  for (int step = 0; step < 40; ++step) {
    ASSERT_EQ(logits_sha256(gpu_logits), logits_sha256(cpu_logits)) << "step " << step;
    const int32_t next[1] = {argmax(cpu_logits)};
    gpu.forward(next, cpu.n_past(), LogitsFor::Last, &gpu_logits, cache);
    cpu.forward(next, LogitsFor::Last, &cpu_logits);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaOnSharedModel, ::testing::Values(test::kStories260K, test::kTinyStories656K),
                         [](const auto& info) {
                           return std::string(info.param).find("260K") != std::string::npos ? std::string("stories260K")
                                                                                            : std::string("TinyStories656K");
                         });

// A synthetic variant as a test name: "f16-qwen2" -> "f16_qwen2".
std::string variant_name(const ::testing::TestParamInfo<const char*>& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

class CudaOnSynthModel : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaOnSynthModel, LogitsHashAndKvEqualCpuForEveryChunking) {
  KVG_REQUIRE_GPU();
  auto model = synth_model(GetParam());
  expect_gpu_equals_cpu(model, prompt_for(*model, 45), GetParam());
}

INSTANTIATE_TEST_SUITE_P(WeightTypes, CudaOnSynthModel,
                         ::testing::Values("f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k", "q4_1", "q5_0",
                                           "q5_1", "q2_k", "q3_k", "q5_k", "f16-qwen2", "f32-llama3", "q8_0-phi3", "f32-qwen3",
                                           "f16-gemma", "f32-gemma2", "f16-gemma3", "f32-starcoder2"),
                         variant_name);

// q8-portable-v1 (kernels/cuda/matmul_q8): every block-quantized format,
// and an f32 model, whose products keep f32 arithmetic under it.
class CudaOnSynthModelQ8 : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaOnSynthModelQ8, LogitsHashAndKvEqualCpuForEveryChunking) {
  KVG_REQUIRE_GPU();
  auto model = synth_model(GetParam());
  try {
    Session probe(model, under(kQ8Recipe));
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Unsupported) throw;
    GTEST_SKIP() << "the CPU forward pass does not compute " << kQ8Recipe.name() << " yet: " << e.what();
  }
  expect_gpu_equals_cpu(model, prompt_for(*model, 45), std::string(GetParam()) + " under " + kQ8Recipe.name(),
                        kQ8Recipe);
}

// The recipe reaches the kernels: a quantized model's GPU logits under q8
// are not its f32 logits, an f32 model's are (no matrix of it is quantized).
TEST_P(CudaOnSynthModelQ8, TheRecipeChoosesTheArithmeticOfQuantizedMatricesOnly) {
  KVG_REQUIRE_GPU();
  auto model = synth_model(GetParam());
  const auto tokens = prompt_for(*model, 12);
  CudaForward f32(model, 64), q8(model, 64, kQ8Recipe);
  EXPECT_EQ(q8.recipe(), kQ8Recipe);
  const Evaluation a = gpu_run(f32, *model, tokens, 0), b = gpu_run(q8, *model, tokens, 0);
  if (std::string(GetParam()) == "f32")
    EXPECT_EQ(logits_sha256(a.logits), logits_sha256(b.logits));
  else
    EXPECT_NE(logits_sha256(a.logits), logits_sha256(b.logits));
}

INSTANTIATE_TEST_SUITE_P(WeightTypes, CudaOnSynthModelQ8,
                         ::testing::Values("f32", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k",
                                           "q5_k", "q6_k", "q8_0-phi3", "q8_0-gemma2", "q8_0-gemma3", "q8_0-starcoder2"),
                         variant_name);

// Compact KV storage for every family: the rounded rows the GPU mirror holds
// are the CPU cache's, and so are the logits (plain llama's:
// CudaSession.CompactKvIsTheCpusBitsAndGraftsAcrossDevices).
class CudaFamilyCompactKv : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaFamilyCompactKv, LogitsHashAndKvEqualCpuForEveryChunking) {
  KVG_REQUIRE_GPU();
  auto model = synth_model(GetParam());
  for (KvStorage storage : {KvStorage::BF16, KvStorage::I8}) {
    const Recipe recipe{Arithmetic::F32, storage};
    expect_gpu_equals_cpu(model, prompt_for(*model, 45), std::string(GetParam()) + " under " + recipe.name(), recipe);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, CudaFamilyCompactKv,
                         ::testing::Values("f16-qwen2", "f32-llama3", "q8_0-phi3", "f32-qwen3", "f16-gemma", "f32-gemma2",
                                           "f16-gemma3", "f32-starcoder2"),
                         variant_name);

}  // namespace
}  // namespace kvg
