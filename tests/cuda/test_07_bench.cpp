// GPU benchmarks for scripts/gpu-check.sh (disabled by default).
#include "tests/cuda/fixtures.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <thread>

#include "engine/graft.hpp"
#include "engine/memory_artifacts.hpp"
#include "engine/sampler.hpp"

namespace kvg {
namespace {

using namespace cuda_test;

// ---------------------------------------------------------------------------
// Benchmark (scripts/gpu-check.sh): prefill and decode throughput on CPU and
// GPU and graft-versus-recompute time, on the model named by
// $KVG_BENCH_MODEL. Disabled by default; run with
// --gtest_also_run_disabled_tests --gtest_filter='CudaBench.*'.

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(CudaBench, DISABLED_CpuVersusGpu) {
  KVG_REQUIRE_GPU();
  const char* path = std::getenv("KVG_BENCH_MODEL");
  if (!path || !*path) GTEST_SKIP() << "set KVG_BENCH_MODEL to a GGUF model";
  const int64_t n_prompt = std::getenv("KVG_BENCH_PROMPT") ? std::atoll(std::getenv("KVG_BENCH_PROMPT")) : 256;
  const int64_t n_cpu_decode = 16, n_gpu_decode = 128, n_graft = n_prompt - 32;
  using clock = std::chrono::steady_clock;
  auto model = Model::load(path);
  const ModelConfig& c = model->config();
  std::vector<int32_t> prompt(static_cast<size_t>(n_prompt));
  for (int64_t i = 0; i < n_prompt; ++i) prompt[size_t(i)] = int32_t(uniform_for_position(7, i) * float(c.n_vocab - 3)) + 3;
  EngineOptions cpu_options;
  cpu_options.threads = int(std::max(1u, std::thread::hardware_concurrency()));
  const int64_t context = std::min<int64_t>(c.n_ctx, 2048);
  cpu_options.max_context = context;

  // CPU: prefill, decode, then graft + evaluate the tail.
  Session cpu(model, cpu_options);
  std::vector<float> cpu_last, logits;
  auto t0 = clock::now();
  cpu.prefill(prompt, 0, LogitsFor::Last, &cpu_last);
  const double cpu_prefill = seconds_since(t0);
  MemoryArtifacts store;
  const Digest id = store.capture_from(cpu, 0, n_graft);
  logits = cpu_last;
  t0 = clock::now();
  for (int64_t i = 0; i < n_cpu_decode; ++i) {
    const int32_t next[1] = {argmax(logits)};
    cpu.forward(next, LogitsFor::Last, &logits);
  }
  const double cpu_decode = seconds_since(t0);
  t0 = clock::now();
  Session cpu_grafted(model, cpu_options);
  graft(cpu_grafted, id, store.opener(), prompt);
  cpu_grafted.prefill(std::span<const int32_t>(prompt).subspan(size_t(n_graft)), 0, LogitsFor::Last, &logits);
  const double cpu_graft = seconds_since(t0);
  const bool cpu_graft_exact = logits_sha256(logits) == logits_sha256(cpu_last);

  // GPU: weights upload (once per model), prefill, decode, graft + tail.
  t0 = clock::now();
  CudaForward gpu(model, context);
  const double upload = seconds_since(t0);
  {  // warm-up: first launches load the kernels
    KvCache warm(c.n_layer, c.kv_row_floats(), context);
    gpu.forward(std::span<const int32_t>(prompt).first(16), 0, LogitsFor::Last, &logits, warm);
  }
  KvCache cache(c.n_layer, c.kv_row_floats(), context);
  std::vector<float> gpu_last;
  t0 = clock::now();
  gpu.forward(prompt, 0, LogitsFor::Last, &gpu_last, cache);
  const double gpu_prefill = seconds_since(t0);
  logits = gpu_last;
  t0 = clock::now();
  for (int64_t i = 0; i < n_gpu_decode; ++i) {
    const int32_t next[1] = {argmax(logits)};
    gpu.forward(next, n_prompt + i, LogitsFor::Last, &logits, cache);
  }
  const double gpu_decode = seconds_since(t0);
  t0 = clock::now();
  Session gpu_grafted(model, cpu_options);  // its host cache receives the artifact; the GPU mirrors it
  graft(gpu_grafted, id, store.opener(), prompt);
  gpu.truncate(0);  // now mirroring gpu_grafted's cache: its grafted rows are uploaded
  gpu.forward(std::span<const int32_t>(prompt).subspan(size_t(n_graft)), n_graft, LogitsFor::Last, &logits,
              gpu_grafted.kv_cache());
  const double gpu_graft = seconds_since(t0);
  const bool gpu_graft_exact = logits_sha256(logits) == logits_sha256(gpu_last);
  const bool same = logits_sha256(gpu_last) == logits_sha256(cpu_last);

  std::printf("\nmodel   %s (%llu parameters, %.2f GB of weights)\n", path, (unsigned long long)model->parameter_count(),
              double(model->weight_bytes()) / 1e9);
  std::printf("gpu     %s; weights uploaded in %.2f s\n", gpu.device_name().c_str(), upload);
  std::printf("cpu     %d threads, isa %s\n\n", cpu_options.threads, isa_name(cpu_options.isa));
  std::printf("| measure                                   | CPU          | GPU          |\n");
  std::printf("|-------------------------------------------|-------------:|-------------:|\n");
  std::printf("| prefill %4lld tokens, tokens/s             | %12.1f | %12.1f |\n", (long long)n_prompt,
              double(n_prompt) / cpu_prefill, double(n_prompt) / gpu_prefill);
  std::printf("| decode (greedy), tokens/s                 | %12.2f | %12.1f |\n", double(n_cpu_decode) / cpu_decode,
              double(n_gpu_decode) / gpu_decode);
  std::printf("| recompute %4lld tokens, s                  | %12.3f | %12.3f |\n", (long long)n_prompt, cpu_prefill,
              gpu_prefill);
  std::printf("| graft %4lld + evaluate %3lld, s              | %12.3f | %12.3f |\n", (long long)n_graft,
              (long long)(n_prompt - n_graft), cpu_graft, gpu_graft);
  std::printf("| graft logits == recompute logits          | %12s | %12s |\n", cpu_graft_exact ? "yes" : "NO",
              gpu_graft_exact ? "yes" : "NO");
  std::printf("| last-token logits SHA-256, GPU == CPU     | %27s |\n", same ? "yes" : "NO");
  EXPECT_TRUE(same);
  EXPECT_TRUE(cpu_graft_exact);
  EXPECT_TRUE(gpu_graft_exact);
}

// Decode speed on the GPU at long contexts (scripts/gpu-check.sh): for each
// context in KVG_BENCH_CONTEXTS (default "1024 8192 32768") the GPU prefills
// that many tokens, 2048 per forward, then decodes 32 greedy tokens. One
// machine-readable line per context, for the check's table.
TEST(CudaBench, DISABLED_DecodeAtLongContext) {
  KVG_REQUIRE_GPU();
  const char* path = std::getenv("KVG_BENCH_MODEL");
  if (!path || !*path) GTEST_SKIP() << "set KVG_BENCH_MODEL to a GGUF model";
  std::vector<int64_t> contexts;
  {
    const char* list = std::getenv("KVG_BENCH_CONTEXTS");
    std::string text = list && *list ? list : "1024 8192 32768";
    for (size_t at = 0; at < text.size();) {
      const size_t end = std::min(text.find(' ', at), text.size());
      if (end > at) contexts.push_back(std::atoll(text.substr(at, end - at).c_str()));
      at = end + 1;
    }
  }
  const int64_t n_decode = 32, chunk = 2048;
  auto model = Model::load(path);
  const ModelConfig& c = model->config();
  for (const int64_t context : contexts) {
    if (context <= 0 || context + n_decode > c.n_ctx) {
      std::printf("bench decode_context=%lld skipped: the model's n_ctx is %lld\n", (long long)context,
                  (long long)c.n_ctx);
      continue;
    }
    std::vector<int32_t> prompt(static_cast<size_t>(context));
    for (int64_t i = 0; i < context; ++i)
      prompt[size_t(i)] = int32_t(uniform_for_position(11, i) * float(c.n_vocab - 3)) + 3;
    CudaForward gpu(model, context + n_decode);
    KvCache cache(c.n_layer, c.kv_row_floats(), context + n_decode);
    std::vector<float> logits;
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t start = 0; start < context; start += chunk) {
      const int64_t n = std::min(chunk, context - start);
      gpu.forward(std::span<const int32_t>(prompt).subspan(size_t(start), size_t(n)), start, LogitsFor::Last, &logits,
                  cache);
    }
    const double prefill = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < n_decode; ++i) {
      const int32_t next[1] = {argmax(logits)};
      gpu.forward(next, context + i, LogitsFor::Last, &logits, cache);
    }
    const double decode = seconds_since(t0);
    std::printf("bench decode_context=%lld prefill_tok_s=%.1f decode_tok_s=%.2f\n", (long long)context,
                double(context) / prefill, double(n_decode) / decode);
  }
}

}  // namespace
}  // namespace kvg
