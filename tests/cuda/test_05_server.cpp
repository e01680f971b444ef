// The GPU in a database server: sessions of one model sharing its upload
// and workspace, generations stepped together, bounded pinned staging.
#include "tests/cuda/fixtures.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <span>

#include "engine/generate.hpp"
#include "tests/support/stepped_generations.hpp"
#ifdef KVG_CUDA_EMULATOR
#include "kernels/cuda/emulator/include/mock_control.hpp"
#elif defined(KVG_HAVE_CUDA)
#include "kernels/cuda/device_memory.hpp"  // cuda::blocking_sync
#endif

namespace kvg {
namespace {

using namespace cuda_test;

// ---------------------------------------------------------------------------
// A database server: a backend builds a Session per SQL call on the model it
// keeps loaded. The weights must stay on the device (one upload per Model),
// the workspace must be reused, and a failed GPU must cost speed, not calls.

TEST(CudaServer, SessionsOfOneModelUploadItsWeightsOnce) {
  KVG_REQUIRE_GPU();
  const auto tokens = [] { return prompt_for(*synth_model("f32"), 12); }();
#ifdef KVG_CUDA_EMULATOR
  const int64_t live_at_start = cuda::mock::counters().live_device_bytes;
#endif
  {
    auto model = synth_model("f32");
    std::vector<float> cpu;
    Session(model, EngineOptions{}).prefill(tokens, 0, LogitsFor::Last, &cpu);
    EngineOptions on_gpu;
    on_gpu.device = Device::Cuda;
    const int64_t uploads_before = CudaForward::weight_uploads();
#ifdef KVG_CUDA_EMULATOR
    cuda::mock::Counters after_first;
#endif
    const int calls = 20;  // as many "SQL calls", each with its own Session
    for (int call = 0; call < calls; ++call) {
      Session session(model, on_gpu);
      std::vector<float> logits;
      session.prefill(tokens, 0, LogitsFor::Last, &logits);
      EXPECT_EQ(logits_sha256(logits), logits_sha256(cpu)) << "call " << call;
#ifdef KVG_CUDA_EMULATOR
      if (call == 0) after_first = cuda::mock::counters();
#endif
    }
    EXPECT_EQ(CudaForward::weight_uploads() - uploads_before, 1);
    // scripts/gpu-check.sh prints this line from a real GPU's run.
    std::printf("weight uploads across %d sessions on one model in this process: %lld\n", calls,
                static_cast<long long>(CudaForward::weight_uploads() - uploads_before));
#ifdef KVG_CUDA_EMULATOR
    // Calls 2..20 reuse the first one's stream, KV mirror, scratch, rotary
    // table and pinned staging: they allocate nothing and upload only their
    // token ids.
    const cuda::mock::Counters after_all = cuda::mock::counters();
    EXPECT_EQ(after_all.device_allocations, after_first.device_allocations);
    EXPECT_EQ(after_all.pinned_allocations, after_first.pinned_allocations);
    EXPECT_EQ(after_all.streams_created, after_first.streams_created);
    EXPECT_EQ(after_all.h2d_bytes - after_first.h2d_bytes, int64_t((calls - 1) * tokens.size() * sizeof(int32_t)));
    EXPECT_GE(after_first.h2d_bytes, int64_t(model->weight_bytes()));
#endif
    // Another Model object (kvg.model changed, or the file did) is another upload.
    auto reloaded = synth_model("f32");
    std::vector<float> logits;
    Session(reloaded, on_gpu).prefill(tokens, 0, LogitsFor::Last, &logits);
    EXPECT_EQ(logits_sha256(logits), logits_sha256(cpu));
    EXPECT_EQ(CudaForward::weight_uploads() - uploads_before, 2);
  }
#ifdef KVG_CUDA_EMULATOR
  // Both models gone: their weights and idle workspaces went with them.
  EXPECT_EQ(cuda::mock::counters().live_device_bytes, live_at_start);
#endif
}

// The engine worker's path on a GPU (engine/generate.hpp: step_together):
// generations of one model on CUDA sessions join, wait and finish at their
// own steps, share the one weight upload and batched passes, and each
// decodes the tokens generate() gives it alone on the CPU, under both
// recipes.
TEST(CudaServer, GenerationsSteppedTogetherEqualEachAloneOnTheCpu) {
  KVG_REQUIRE_GPU();
  for (const char* variant : {"f32", "q8_0"}) {
    const auto model = synth_model(variant);
    EngineOptions cpu, gpu;
    if (std::string(variant) == "q8_0") cpu.recipe = gpu.recipe = kQ8Recipe;
    gpu.device = Device::Cuda;
    std::vector<test::SteppedJob> jobs;
    for (int i = 0; i < 3; ++i) {
      test::SteppedJob job{prompt_for(*model, size_t(5 + 4 * i), size_t(7919 + 31 * i)), {}, i};
      job.options.max_new_tokens = 4 + i;
      job.options.stop_at_eos = false;
      job.options.prefill_chunk = i == 1 ? 3 : 0;
      if (i == 2) job.options.sampling.temperature = 0.8f, job.options.sampling.seed = 17;
      jobs.push_back(std::move(job));
    }
    const int64_t uploads_before = CudaForward::weight_uploads();
    std::vector<std::unique_ptr<Session>> sessions;
    for (size_t i = 0; i < jobs.size(); ++i) sessions.push_back(std::make_unique<Session>(model, gpu));
    // Job 0 sits out every third step: a client not reading.
    const int64_t batched_before = CudaForward::batched_passes();
    const auto tokens =
        test::step_jobs_together(sessions, jobs, [](size_t job, int step) { return !(job == 0 && step % 3 == 2); });
    EXPECT_EQ(CudaForward::weight_uploads() - uploads_before, 1) << variant;
    EXPECT_GT(CudaForward::batched_passes() - batched_before, 0) << variant << ": the sessions shared passes";
    for (size_t i = 0; i < jobs.size(); ++i) {
      Session alone(model, cpu);
      EXPECT_EQ(tokens[i], generate(alone, jobs[i].prompt, jobs[i].options).tokens)
          << variant << " job " << i;
    }
  }
}

// Whether two sessions hold the same KV bytes for every position they hold.
bool same_kv(const Session& a, const Session& b) {
  if (a.n_past() != b.n_past()) return false;
  const KvCache &x = a.kv_cache(), &y = b.kv_cache();
  const size_t row_bytes = size_t(x.row_floats()) * sizeof(float);
  for (int l = 0; l < x.n_layer(); ++l)
    for (int64_t p = 0; p < a.n_past(); ++p)
      if (std::memcmp(x.k(l, p), y.k(l, p), row_bytes) != 0 || std::memcmp(x.v(l, p), y.v(l, p), row_bytes) != 0)
        return false;
  return true;
}

// The engine worker's batched pass on a GPU (CudaForward::forward_batch):
// sessions at their own positions (one empty, one after a long prefill),
// with a prefill chunk or a decode row, one asking every row's logits and
// one none, go through one pass, twice; each session's logits and KV rows
// are the bytes its CPU session gives alone, under every arithmetic, a
// compact KV storage, and a family with q/k/v biases and NeoX rotary.
TEST(CudaServer, ABatchedPassGivesEachSessionItsOwnCpuBits) {
  KVG_REQUIRE_GPU();
  struct Case {
    const char* variant;
    Recipe recipe;
  };
  for (const Case& c : {Case{"f32", {}}, Case{"q8_0", kQ8Recipe}, Case{"q8_0", {Arithmetic::Q8, KvStorage::I8}},
                        Case{"f16-qwen2", {}}}) {
    const auto model = synth_model(c.variant);
    EngineOptions cpu, gpu;
    cpu.recipe = gpu.recipe = c.recipe;
    gpu.device = Device::Cuda;
    struct Job {
      size_t before, part;
      LogitsFor which;
    };
    const Job jobs[] = {{7, 1, LogitsFor::Last}, {0, 5, LogitsFor::All}, {40, 3, LogitsFor::Last},
                        {12, 2, LogitsFor::None}};
    std::vector<std::unique_ptr<Session>> on_gpu, on_cpu;
    std::vector<std::vector<int32_t>> tokens;
    for (size_t i = 0; i < std::size(jobs); ++i) {
      tokens.push_back(prompt_for(*model, jobs[i].before + 2 * jobs[i].part, 7919 + 13 * i));
      on_gpu.push_back(std::make_unique<Session>(model, gpu));
      on_cpu.push_back(std::make_unique<Session>(model, cpu));
      const auto before = std::span<const int32_t>(tokens[i]).first(jobs[i].before);
      on_gpu[i]->forward(before, LogitsFor::None, nullptr);
      on_cpu[i]->forward(before, LogitsFor::None, nullptr);
    }
    const int64_t batched_before = CudaForward::batched_passes();
    for (size_t pass = 0; pass < 2; ++pass) {
      std::vector<std::vector<float>> gpu_logits(std::size(jobs)), cpu_logits(std::size(jobs));
      std::vector<ForwardRequest> requests;
      for (size_t i = 0; i < std::size(jobs); ++i) {
        const auto part = std::span<const int32_t>(tokens[i]).subspan(jobs[i].before + pass * jobs[i].part, jobs[i].part);
        requests.push_back({on_gpu[i].get(), part, jobs[i].which, &gpu_logits[i]});
        on_cpu[i]->forward(part, jobs[i].which, &cpu_logits[i]);
      }
      Session::forward_batch(requests);
      for (size_t i = 0; i < std::size(jobs); ++i) {
        const std::string what = std::string(c.variant) + " " + c.recipe.name() + " pass " + std::to_string(pass) +
                                 " session " + std::to_string(i);
        if (jobs[i].which != LogitsFor::None) {
          EXPECT_FALSE(gpu_logits[i].empty()) << what;
          EXPECT_EQ(logits_sha256(gpu_logits[i]), logits_sha256(cpu_logits[i])) << what;
        }
        EXPECT_TRUE(same_kv(*on_gpu[i], *on_cpu[i])) << what;
      }
    }
    EXPECT_EQ(CudaForward::batched_passes() - batched_before, 2) << c.variant;
  }
}

// Pinned staging is bounded (CudaForward's staging_bytes): a graft's upload,
// the new KV rows and all-rows logits larger than the buffer travel through
// it in chunks and arrive bit for bit.
TEST(CudaServer, TransfersLargerThanTheStagingBufferCopyExactly) {
  KVG_REQUIRE_GPU();
  auto model = synth_model("f32");  // a new Model: a fresh workspace, no staging yet
  const ModelConfig& c = model->config();
  const auto tokens = prompt_for(*model, 40);
  Session cpu(model, EngineOptions{});
  std::vector<float> expected;
  cpu.prefill(tokens, 0, LogitsFor::All, &expected);

  const size_t position_bytes = size_t(c.n_layer) * 2 * size_t(c.kv_row_floats()) * sizeof(float);
  const size_t logits_row_bytes = size_t(c.n_vocab) * sizeof(float);
  const size_t staging = 3 * position_bytes + 5;  // three KV positions per trip
#ifdef KVG_CUDA_EMULATOR
  cuda::mock::reset_largest_pinned();
#endif
  CudaForward gpu(model, 64, kDefaultRecipe, staging);
  // Rows [0, 20) on the host only, as after a graft: 20 positions to upload.
  KvCache host(c.n_layer, c.kv_row_floats(), 64);
  host.reserve(40);
  const size_t row_bytes = size_t(c.kv_row_floats()) * sizeof(float);
  for (int64_t p = 0; p < 20; ++p)
    for (int l = 0; l < c.n_layer; ++l) {
      std::memcpy(host.k(l, p), cpu.kv_cache().k(l, p), row_bytes);
      std::memcpy(host.v(l, p), cpu.kv_cache().v(l, p), row_bytes);
    }
  std::vector<float> logits;
  gpu.forward(std::span<const int32_t>(tokens.data() + 20, 20), 20, LogitsFor::All, &logits, host);
  ASSERT_EQ(logits.size(), 20 * size_t(c.n_vocab));
  EXPECT_EQ(logits_sha256(logits),
            logits_sha256(std::vector<float>(expected.begin() + std::ptrdiff_t(20 * c.n_vocab), expected.end())));
  for (int64_t p = 0; p < 40; ++p)
    for (int l = 0; l < c.n_layer; ++l) {
      EXPECT_EQ(std::memcmp(host.k(l, p), cpu.kv_cache().k(l, p), row_bytes), 0) << "K, position " << p;
      EXPECT_EQ(std::memcmp(host.v(l, p), cpu.kv_cache().v(l, p), row_bytes), 0) << "V, position " << p;
    }
  EXPECT_EQ(gpu.device_positions(), 40);
  // One more step on top (the fast path: it fits) still equals the CPU.
  const int32_t next[1] = {tokens[5]};
  std::vector<float> cpu_next, gpu_next;
  cpu.forward(next, LogitsFor::Last, &cpu_next);
  gpu.forward(next, 40, LogitsFor::Last, &gpu_next, host);
  EXPECT_EQ(logits_sha256(gpu_next), logits_sha256(cpu_next));
#ifdef KVG_CUDA_EMULATOR
  // No staging buffer grew past the bound (or past one unit, when a single
  // logits row is larger than it).
  EXPECT_LE(size_t(cuda::mock::counters().largest_pinned_bytes), std::max(staging, logits_row_bytes));
#else
  (void)logits_row_bytes;
#endif
}

#if defined(KVG_HAVE_CUDA) && !defined(KVG_CUDA_EMULATOR)
// A backend waiting for its forward pass must not spin a core that other
// backends need (the probe sets the flag before the context exists).
TEST(CudaServer, WaitingForTheGpuSleepsInsteadOfSpinning) {
  KVG_REQUIRE_GPU();
  EXPECT_TRUE(cuda::blocking_sync());
}
#endif

}  // namespace
}  // namespace kvg
