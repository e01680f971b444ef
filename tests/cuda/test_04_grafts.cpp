// KV across devices (GPU only): artifacts captured on one device graft
// exactly on the other, directly and through the Session wiring.
#include "tests/cuda/fixtures.hpp"

#include <cstring>
#include <span>

#include "engine/graft.hpp"
#include "engine/memory_artifacts.hpp"
#include "storage/sha256.hpp"

namespace kvg {
namespace {

using namespace cuda_test;

// ---------------------------------------------------------------------------
// Grafts across devices (GPU only), driving CudaForward directly on the host
// cache of a CPU session, exactly as the Session wiring does.

class CudaGraft : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_device_available(&why)) GTEST_SKIP() << "no GPU: " << why;
    KVG_REQUIRE_TEST_DATA(GetParam());
    model_ = Model::load(test::data_path(GetParam()));
    tokens_ = prompt_for(*model_, 75, 104729);
  }
  std::shared_ptr<const Model> model_;
  std::vector<int32_t> tokens_;
  MemoryArtifacts store_;
};

TEST_P(CudaGraft, CpuArtifactGraftsExactlyOnGpuAndEqualsMonolithicGpu) {
  const size_t n_vocab = size_t(model_->config().n_vocab);
  CudaForward gpu(model_, model_->config().n_ctx);
  // Monolithic on the GPU.
  const Evaluation mono = gpu_run(gpu, *model_, tokens_, 0);
  for (int64_t split : {int64_t(1), int64_t(31), int64_t(32), int64_t(33), int64_t(74)}) {
    Session cpu(model_, EngineOptions{});
    cpu.prefill(std::span<const int32_t>(tokens_.data(), size_t(split)), 0, LogitsFor::None, nullptr);
    const Digest id = store_.capture_from(cpu, 0, split);

    Session grafted(model_, EngineOptions{});  // host cache receives the artifact
    gpu.truncate(0);  // this CudaForward now mirrors another cache: nothing on the device is valid for it
    ASSERT_EQ(graft(grafted, id, store_.opener(), tokens_).n_tokens, split);
    std::vector<float> logits;
    const auto rest = std::span<const int32_t>(tokens_).subspan(size_t(split));
    gpu.forward(rest, split, LogitsFor::All, &logits, grafted.kv_cache());  // uploads the grafted rows first
    EXPECT_EQ(gpu.device_positions(), int64_t(tokens_.size()));
    const std::vector<float> expected(mono.logits.begin() + std::ptrdiff_t(size_t(split) * n_vocab), mono.logits.end());
    EXPECT_EQ(logits_sha256(logits), logits_sha256(expected)) << "split " << split;
    EXPECT_TRUE(same_kv(grafted.kv_cache(), *mono.cache, int64_t(tokens_.size()))) << "split " << split;
  }
}

TEST_P(CudaGraft, GpuKvCapturesTheSameArtifactAndGraftsExactlyOnCpu) {
  const int64_t split = 40;
  const auto prefix = std::span<const int32_t>(tokens_.data(), size_t(split));
  Session cpu(model_, EngineOptions{});
  cpu.prefill(prefix, 0, LogitsFor::None, nullptr);
  const Digest cpu_id = store_.capture_from(cpu, 0, split);

  Session gpu_filled(model_, EngineOptions{});
  CudaForward gpu(model_, gpu_filled.max_context());
  gpu.forward(prefix, 0, LogitsFor::None, nullptr, gpu_filled.kv_cache());
  gpu_filled.append_grafted(prefix);  // the rows are there; declare them
  const Digest gpu_id = store_.capture_from(gpu_filled, 0, split);
  EXPECT_EQ(to_hex(gpu_id), to_hex(cpu_id)) << "the GPU's KV bytes differ from the CPU's";

  GraftCheckOptions options;
  options.samples = 4;
  const auto r = graft_check(model_, EngineOptions{}, gpu_id, store_.opener(), tokens_, options);
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(r.graft_logits_sha256, r.recompute_logits_sha256);
}

TEST_P(CudaGraft, TruncationInvalidatesDeviceRows) {
  // Evaluate a prompt, truncate, continue differently: the device must not
  // reuse the rows past the cut, and a graft into a fresh cache must be
  // uploaded rather than mistaken for the previous cache's rows.
  CudaForward gpu(model_, model_->config().n_ctx);
  KvCache cache(model_->config().n_layer, model_->config().kv_row_floats(), gpu.max_positions());
  std::vector<float> logits;
  gpu.forward(tokens_, 0, LogitsFor::None, nullptr, cache);
  gpu.truncate(20);
  EXPECT_EQ(gpu.device_positions(), 20);
  std::vector<int32_t> other(tokens_.begin(), tokens_.begin() + 20);
  for (int i = 0; i < 30; ++i) other.push_back(int32_t(5 + (i * 31) % 200));
  gpu.forward(std::span<const int32_t>(other).subspan(20), 20, LogitsFor::All, &logits, cache);
  const Evaluation cpu = cpu_run(model_, other, 0);
  const size_t n_vocab = size_t(model_->config().n_vocab);
  EXPECT_EQ(logits_sha256(logits),
            logits_sha256(std::vector<float>(cpu.logits.begin() + std::ptrdiff_t(20 * n_vocab), cpu.logits.end())));

  KvCache fresh(model_->config().n_layer, model_->config().kv_row_floats(), gpu.max_positions());
  std::vector<float> again;
  fresh.reserve(20);
  for (int64_t p = 0; p < 20; ++p)
    for (int l = 0; l < model_->config().n_layer; ++l) {
      std::memcpy(fresh.k(l, p), cpu.cache->k(l, p), size_t(model_->config().kv_row_floats()) * 4);
      std::memcpy(fresh.v(l, p), cpu.cache->v(l, p), size_t(model_->config().kv_row_floats()) * 4);
    }
  gpu.forward(std::span<const int32_t>(other).subspan(20), 20, LogitsFor::All, &again, fresh);
  EXPECT_EQ(logits_sha256(again), logits_sha256(logits));
}

INSTANTIATE_TEST_SUITE_P(Models, CudaGraft, ::testing::Values(test::kStories260K, test::kTinyStories656K),
                         [](const auto& info) {
                           return std::string(info.param).find("260K") != std::string::npos ? std::string("stories260K")
                                                                                            : std::string("TinyStories656K");
                         });

// ---------------------------------------------------------------------------
// Through the Session wiring (EngineOptions::device = Device::Cuda).

TEST(CudaSession, PrefillChunksAndGraftCheckAreExactOnCuda) {
  KVG_REQUIRE_GPU();
  KVG_REQUIRE_TEST_DATA(test::kTinyStories656K);
  EngineOptions on_gpu;
  KVG_REQUIRE_DEVICE_OPTION(on_gpu, "cuda");
  auto model = Model::load(test::data_path(test::kTinyStories656K));
  const auto tokens = prompt_for(*model, 75, 104729);
  std::vector<float> cpu_logits;
  Session(model, EngineOptions{}).prefill(tokens, 0, LogitsFor::All, &cpu_logits);
  for (int64_t chunk : {int64_t(1), int64_t(7), int64_t(0)}) {
    std::vector<float> logits;
    Session(model, on_gpu).prefill(tokens, chunk, LogitsFor::All, &logits);
    EXPECT_EQ(logits_sha256(logits), logits_sha256(cpu_logits)) << "chunk " << chunk;
  }
  MemoryArtifacts store;
  for (bool capture_on_gpu : {false, true}) {
    Session source(model, capture_on_gpu ? on_gpu : EngineOptions{});
    source.prefill(std::span<const int32_t>(tokens.data(), 33), 0, LogitsFor::None, nullptr);
    const Digest id = store.capture_from(source, 0, 33);
    GraftCheckOptions options;
    options.samples = 4;
    // Graft onto the other device than the capture's, and onto the same.
    for (const EngineOptions& target : {on_gpu, EngineOptions{}}) {
      const auto r = graft_check(model, target, id, store.opener(), tokens, options);
      EXPECT_TRUE(r.exact) << "captured on " << (capture_on_gpu ? "GPU" : "CPU");
      EXPECT_EQ(r.recompute_logits_sha256,
                logits_sha256(std::vector<float>(cpu_logits.begin() + std::ptrdiff_t(33 * model->config().n_vocab),
                                                 cpu_logits.end())));
    }
  }
}

// Under a compact KV storage the GPU rounds the new rows as the CPU does:
// the same logits and KV for every chunking, and artifacts that graft
// exactly across devices.
TEST(CudaSession, CompactKvIsTheCpusBitsAndGraftsAcrossDevices) {
  KVG_REQUIRE_GPU();
  KVG_REQUIRE_TEST_DATA(test::kTinyStories656K);
  auto model = Model::load(test::data_path(test::kTinyStories656K));
  const auto tokens = prompt_for(*model, 75, 104729);
  const ModelConfig& c = model->config();
  for (KvStorage storage : {KvStorage::BF16, KvStorage::I8}) {
    SCOPED_TRACE(kv_storage_name(storage));
    EngineOptions on_cpu, on_gpu;
    on_cpu.recipe.kv = on_gpu.recipe.kv = storage;
    KVG_REQUIRE_DEVICE_OPTION(on_gpu, "cuda");
    Session cpu(model, on_cpu);
    std::vector<float> cpu_logits;
    cpu.prefill(tokens, 0, LogitsFor::All, &cpu_logits);
    std::vector<float> f32_logits;
    Session(model, EngineOptions{}).prefill(tokens, 0, LogitsFor::All, &f32_logits);
    EXPECT_NE(logits_sha256(cpu_logits), logits_sha256(f32_logits)) << "the storage changed nothing";
    for (int64_t chunk : {int64_t(1), int64_t(7), int64_t(0)}) {
      Session gpu(model, on_gpu);
      std::vector<float> logits;
      gpu.prefill(tokens, chunk, LogitsFor::All, &logits);
      EXPECT_EQ(logits_sha256(logits), logits_sha256(cpu_logits)) << "chunk " << chunk;
      const size_t floats = tokens.size() * size_t(c.kv_row_floats());
      for (int l = 0; l < c.n_layer; ++l) {
        EXPECT_EQ(0, std::memcmp(gpu.kv_cache().k(l, 0), cpu.kv_cache().k(l, 0), floats * 4)) << "layer " << l;
        EXPECT_EQ(0, std::memcmp(gpu.kv_cache().v(l, 0), cpu.kv_cache().v(l, 0), floats * 4)) << "layer " << l;
      }
    }
    MemoryArtifacts store;
    for (bool capture_on_gpu : {false, true}) {
      Session source(model, capture_on_gpu ? on_gpu : on_cpu);
      source.prefill(std::span<const int32_t>(tokens.data(), 33), 0, LogitsFor::None, nullptr);
      const Digest id = store.capture_from(source, 0, 33);
      GraftCheckOptions options;
      options.samples = 2;
      for (const EngineOptions& target : {on_gpu, on_cpu}) {
        const auto r = graft_check(model, target, id, store.opener(), tokens, options);
        EXPECT_TRUE(r.exact) << "captured on " << (capture_on_gpu ? "GPU" : "CPU");
      }
    }
  }
}

}  // namespace
}  // namespace kvg
