// kvg bench: prefill and decode throughput, and the weight bandwidth decode
// achieves against a plain memory read measured in the same run.
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <span>
#include <vector>

#include "cli/args.hpp"
#include "cli/clock.hpp"
#include "cli/commands.hpp"
#include "cli/progress.hpp"
#include "cli/engine_flags.hpp"
#include "engine/sampler.hpp"

namespace kvg::cli {

namespace {

// GB/s of summing a buffer far larger than any cache, over `threads` threads.
double memory_read_gbps(int threads) {
  const size_t bytes = size_t(1) << 30;
  std::vector<uint64_t> buffer(bytes / 8);
  for (size_t i = 0; i < buffer.size(); i += 512) buffer[i] = i;  // touch every page
  ThreadPool pool(threads);
  std::vector<uint64_t> sums(64, 0);
  const size_t parts = 64, per = buffer.size() / parts;
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = now_seconds();
    pool.run(parts, [&](size_t p) {
      uint64_t s = 0;
      const uint64_t* b = buffer.data() + p * per;
      for (size_t i = 0; i < per; ++i) s += b[i];
      sums[p] = s;
    });
    best = std::max(best, double(bytes) / (now_seconds() - t0) / 1e9);
  }
  return best;
}

struct BenchRun {
  Recipe recipe;
  double prefill_s = 0, decode_s = 0;
};

// One prefill of the prompt (a single forward call, what is measured), then
// n_gen greedy decode steps.
BenchRun run_bench(const std::shared_ptr<const Model>& model, EngineOptions options, const Recipe& recipe,
                   const std::vector<int32_t>& prompt, int64_t n_gen) {
  options.recipe = recipe;
  std::vector<float> logits;
  {
    // Untimed: the first pass over the weights pays their page faults and
    // cold caches, which would otherwise land in the first recipe's prefill.
    Session warm(model, options);
    warm.prefill(std::span<const int32_t>(prompt.data(), std::min<size_t>(prompt.size(), 8)), 0, LogitsFor::Last,
                 &logits);
  }
  Session session(model, options);
  BenchRun run{recipe};
  // The prefill's line shows only its start and end; decode redraws at most
  // ten times a second.
  ProgressLine progress("bench: prefill", "tokens");
  double t0 = now_seconds();
  session.prefill(prompt, 0, LogitsFor::Last, &logits, {}, progress.reporter());
  run.prefill_s = now_seconds() - t0;
  progress.restart("bench: decode");
  t0 = now_seconds();
  for (int64_t i = 0; i < n_gen; ++i) {
    progress.update(i, n_gen);
    const int32_t next[1] = {argmax(logits)};
    session.forward(next, LogitsFor::Last, &logits);
  }
  run.decode_s = now_seconds() - t0;
  return run;
}

}  // namespace

int cmd_bench(const Args& args) {
  auto model = load_model(args);
  std::vector<Recipe> recipes;
  const EngineOptions options = engine_options(args, &recipes);
  const int64_t n_prompt = args.get_int("prompt-tokens", 128);
  const int64_t n_gen = args.get_int("gen-tokens", 64);
  const int n_vocab = model->config().n_vocab;

  // Deterministic pseudo-random prompt from the vocabulary (the content does
  // not change the cost of a dense forward pass).
  std::vector<int32_t> prompt(static_cast<size_t>(n_prompt));
  for (int64_t i = 0; i < n_prompt; ++i) prompt[size_t(i)] = int32_t(uniform_for_position(7, i) * float(n_vocab - 3)) + 3;

  // Every recipe in one run, back to back, so their ratios share the machine's load.
  std::vector<BenchRun> runs;
  for (const Recipe& recipe : recipes) runs.push_back(run_bench(model, options, recipe, prompt, n_gen));

  const double weight_gb = double(model->weight_bytes()) / 1e9;
  const double mem = args.has("skip-memory") ? 0 : memory_read_gbps(options.threads);
  if (args.has("json")) {  // for scripts/bench-report.py and other tools: one object per recipe
    for (const BenchRun& r : runs) {
      const double decode_tps = double(n_gen) / r.decode_s;
      std::printf("{\"model\":\"%s\",\"architecture\":\"%s\",\"parameters\":%llu,\"weight_bytes\":%llu,"
                  "\"recipe\":\"%s\",\"isa\":\"%s\",\"threads\":%d,"
                  "\"prefill\":{\"tokens\":%lld,\"seconds\":%.6f,\"tokens_per_s\":%.3f},"
                  "\"decode\":{\"tokens\":%lld,\"seconds\":%.6f,\"tokens_per_s\":%.3f,\"weight_gbps\":%.4f},"
                  "\"memory_read_gbps\":%s}\n",
                  json_escape(model->path()).c_str(), json_escape(model->config().architecture).c_str(),
                  (unsigned long long)model->parameter_count(), (unsigned long long)model->weight_bytes(),
                  r.recipe.name().c_str(), isa_name(options.isa), options.threads, (long long)n_prompt, r.prefill_s,
                  double(n_prompt) / r.prefill_s, (long long)n_gen, r.decode_s, decode_tps, weight_gb * decode_tps,
                  mem > 0 ? std::to_string(mem).c_str() : "null");
    }
    return 0;
  }
  std::printf("model        %s (%s, %llu parameters, %.3f GB of weights)\n", model->path().c_str(),
              model->config().architecture.c_str(), (unsigned long long)model->parameter_count(), weight_gb);
  std::printf("engine       isa %s, %d thread(s); prompt %lld tokens, %lld decoded\n", isa_name(options.isa),
              options.threads, (long long)n_prompt, (long long)n_gen);
  if (mem > 0) std::printf("memory read  %.2f GB/s (1 GiB, %d thread(s), after the runs)\n", mem, options.threads);
  std::printf("\n| recipe | prefill tokens/s | decode tokens/s | decode weight GB/s | of memory read |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  for (const BenchRun& r : runs) {
    const double decode_tps = double(n_gen) / r.decode_s;
    char share[32] = "";
    if (mem > 0) std::snprintf(share, sizeof(share), "%.0f%%", 100.0 * weight_gb * decode_tps / mem);
    std::printf("| %s | %.1f | %.1f | %.2f | %s |\n", r.recipe.name().c_str(), double(n_prompt) / r.prefill_s,
                decode_tps, weight_gb * decode_tps, share);
  }
  return 0;
}

}  // namespace kvg::cli
