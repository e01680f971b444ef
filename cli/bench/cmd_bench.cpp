// kvg bench: prefill and decode throughput, and the weight bandwidth decode
// achieves against a plain memory read measured in the same run.
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cli/args.hpp"
#include "cli/bench/bench_support.hpp"
#include "cli/clock.hpp"
#include "cli/commands.hpp"
#include "cli/engine_flags.hpp"
#include "cli/progress_line.hpp"
#include "cli/version.hpp"
#include "common/error.hpp"
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
  double prefill_s = 0, decode_s = 0;
};

// One recipe's runs, and what they measured.
struct RecipeRuns {
  Recipe recipe;
  std::vector<BenchRun> runs;
  std::vector<double> prefill_tps, decode_tps;
};

// Untimed, once per recipe before its runs: the first pass over the weights
// pays their page faults and cold caches, which would otherwise land in the
// first run's prefill.
void warm_up(const std::shared_ptr<const Model>& model, EngineOptions options, const Recipe& recipe,
             const std::vector<int32_t>& prompt) {
  options.recipe = recipe;
  std::vector<float> logits;
  Session warm(model, options);
  warm.prefill(std::span<const int32_t>(prompt.data(), std::min<size_t>(prompt.size(), 8)), 0, LogitsFor::Last,
               &logits);
}

// One prefill of the prompt (a single forward call, what is measured), then
// n_gen greedy decode steps, in fresh sessions: with several sequences, each
// step is one batched pass over all of them (Session::forward_batch), the
// prompt rotated by one token per sequence.
BenchRun run_bench(const std::shared_ptr<const Model>& model, EngineOptions options, const Recipe& recipe,
                   const std::vector<int32_t>& prompt, int64_t n_gen, int64_t sequences, const std::string& label) {
  options.recipe = recipe;
  std::vector<std::unique_ptr<Session>> sessions;
  std::vector<std::vector<int32_t>> prompts, next(static_cast<size_t>(sequences), std::vector<int32_t>(1));
  std::vector<std::vector<float>> logits(static_cast<size_t>(sequences));
  for (int64_t i = 0; i < sequences; ++i) {
    sessions.push_back(std::make_unique<Session>(model, options));
    prompts.push_back(prompt);
    std::rotate(prompts.back().begin(), prompts.back().begin() + i % int64_t(prompt.size()), prompts.back().end());
  }
  // Every sequence's step in one pass; one sequence alone through forward(),
  // so a GPU session runs as it always did.
  auto step = [&](const std::vector<std::vector<int32_t>>& tokens) {
    if (sequences == 1) return sessions[0]->forward(tokens[0], LogitsFor::Last, &logits[0]);
    std::vector<ForwardRequest> requests;
    for (int64_t i = 0; i < sequences; ++i) requests.push_back({sessions[size_t(i)].get(), tokens[size_t(i)], LogitsFor::Last, &logits[size_t(i)]});
    Session::forward_batch(requests);
  };
  BenchRun run;
  // The prefill's line shows only its start and end; decode redraws at most
  // ten times a second.
  ProgressLine progress("bench: " + label + "prefill", "tokens");
  progress.update(0, int64_t(prompt.size()));
  double t0 = now_seconds();
  step(prompts);
  run.prefill_s = now_seconds() - t0;
  progress.restart("bench: " + label + "decode");
  t0 = now_seconds();
  for (int64_t i = 0; i < n_gen; ++i) {
    progress.update(i, n_gen);
    for (int64_t s = 0; s < sequences; ++s) next[size_t(s)][0] = argmax(logits[size_t(s)]);
    step(next);
  }
  run.decode_s = now_seconds() - t0;
  return run;
}

std::string seconds_list(const std::vector<BenchRun>& runs, double BenchRun::*field) {
  std::string out;
  char buf[32];
  for (const BenchRun& r : runs) {
    std::snprintf(buf, sizeof buf, "%s%.9f", out.empty() ? "" : ",", r.*field);  // ns: a tiny model decodes in µs
    out += buf;
  }
  return out;
}

// "123.4 ± 5.6", as llama-bench prints a column.
std::string plus_minus(Spread s, const char* format) {
  char mean[32], sd[32];
  std::snprintf(mean, sizeof mean, format, s.mean);
  std::snprintf(sd, sizeof sd, format, s.stddev);
  return std::string(mean) + " ± " + sd;
}

// The one JSON document of --json: the model and settings once, then each
// recipe with its mean, standard deviation and every run's seconds.
void print_json(const Model& model, const EngineOptions& options, const std::vector<RecipeRuns>& all,
                int64_t n_prompt, int64_t n_gen, int64_t repetitions, int64_t sequences, double memory_gbps) {
  const double weight_gb = double(model.weight_bytes()) / 1e9;
  const double token_gb = weight_gb / double(sequences);  // a pass reads the weights once for every sequence
  std::printf("{\"kvg\":{\"version\":\"%s\",\"commit\":\"%s\"},\"model\":\"%s\",\"architecture\":\"%s\","
              "\"parameters\":%llu,\"weight_bytes\":%llu,\"context_length\":%d,\"isa\":\"%s\",\"threads\":%d,"
              "\"repetitions\":%lld,\"sequences\":%lld,\"prompt_tokens\":%lld,\"gen_tokens\":%lld,\"memory_read_gbps\":%s,"
              "\"recipes\":[",
              version(), build_commit(), json_escape(model.path()).c_str(),
              json_escape(model.config().architecture).c_str(), (unsigned long long)model.parameter_count(),
              (unsigned long long)model.weight_bytes(), model.config().n_ctx, isa_name(options.isa),
              options.threads, (long long)repetitions, (long long)sequences, (long long)n_prompt, (long long)n_gen,
              memory_gbps > 0 ? std::to_string(memory_gbps).c_str() : "null");
  for (size_t i = 0; i < all.size(); ++i) {
    const RecipeRuns& r = all[i];
    const Spread prefill = spread_of(r.prefill_tps), decode = spread_of(r.decode_tps);
    std::printf("%s{\"recipe\":\"%s\",\"prefill\":{\"tokens\":%lld,\"tokens_per_s\":%.3f,\"tokens_per_s_stddev\":%.3f,"
                "\"seconds\":[%s]},\"decode\":{\"tokens\":%lld,\"tokens_per_s\":%.3f,\"tokens_per_s_stddev\":%.3f,"
                "\"weight_gbps\":%.4f,\"weight_gbps_stddev\":%.4f,\"seconds\":[%s]}}",
                i ? "," : "", r.recipe.name().c_str(), (long long)n_prompt, prefill.mean, prefill.stddev,
                seconds_list(r.runs, &BenchRun::prefill_s).c_str(), (long long)n_gen, decode.mean, decode.stddev,
                token_gb * decode.mean, token_gb * decode.stddev, seconds_list(r.runs, &BenchRun::decode_s).c_str());
  }
  std::printf("]}\n");
}

void print_table(const Model& model, const EngineOptions& options, const std::vector<RecipeRuns>& all,
                 int64_t n_prompt, int64_t n_gen, int64_t repetitions, int64_t sequences, double memory_gbps) {
  const double weight_gb = double(model.weight_bytes()) / 1e9;
  const double token_gb = weight_gb / double(sequences);  // a pass reads the weights once for every sequence
  std::printf("model        %s (%s, %llu parameters, %.3f GB of weights)\n", model.path().c_str(),
              model.config().architecture.c_str(), (unsigned long long)model.parameter_count(), weight_gb);
  std::printf("engine       isa %s, %d thread(s); prompt %lld tokens, %lld decoded", isa_name(options.isa),
              options.threads, (long long)n_prompt, (long long)n_gen);
  if (sequences > 1) std::printf("; %lld sequences in batched passes, tokens/s summed", (long long)sequences);
  std::printf("\n");
  std::printf("runs         %lld per recipe: mean ± standard deviation\n", (long long)repetitions);
  if (memory_gbps > 0)
    std::printf("memory read  %.2f GB/s (1 GiB, %d thread(s), after the runs)\n", memory_gbps, options.threads);
  std::printf("\n| recipe | prefill tokens/s | decode tokens/s | decode weight GB/s | of memory read |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  for (const RecipeRuns& r : all) {
    const Spread prefill = spread_of(r.prefill_tps), decode = spread_of(r.decode_tps);
    char share[32] = "";
    if (memory_gbps > 0) std::snprintf(share, sizeof(share), "%.0f%%", 100.0 * token_gb * decode.mean / memory_gbps);
    std::printf("| %s | %s | %s | %s | %s |\n", r.recipe.name().c_str(), plus_minus(prefill, "%.1f").c_str(),
                plus_minus(decode, "%.1f").c_str(), plus_minus({token_gb * decode.mean, token_gb * decode.stddev}, "%.2f").c_str(),
                share);
  }
}

}  // namespace

int cmd_bench(const Args& args) {
  auto model = load_model(args);
  std::vector<Recipe> recipes;
  const EngineOptions options = engine_options(args, &recipes);
  const int64_t repetitions = args.get_int("repetitions", 5, 1, 1000);
  const int64_t sequences = args.get_int("sequences", 1, 1, 256);
  if (sequences > 1 && options.device != Device::Cpu)
    throw Error(ErrorCode::InvalidArgument, "--sequences runs batched passes on the CPU: use --device cpu");
  const int64_t limit = Session(model, options).max_context();
  const int64_t n_prompt = args.get_int("prompt-tokens", std::min<int64_t>(128, limit / 2), 1, limit - 1);
  const int64_t n_gen = args.get_int("gen-tokens", std::min<int64_t>(64, limit - n_prompt), 1, limit - n_prompt);
  const int n_vocab = model->config().n_vocab;
  if (n_vocab <= 3) throw Error(ErrorCode::InvalidArgument, "the model's vocabulary is too small for a random prompt");

  // Deterministic pseudo-random prompt from the vocabulary (the content does
  // not change the cost of a dense forward pass).
  std::vector<int32_t> prompt(static_cast<size_t>(n_prompt));
  for (int64_t i = 0; i < n_prompt; ++i) prompt[size_t(i)] = int32_t(uniform_for_position(7, i) * float(n_vocab - 3)) + 3;

  std::vector<RecipeRuns> all;
  for (const Recipe& recipe : recipes) {
    warm_up(model, options, recipe, prompt);
    all.emplace_back().recipe = recipe;
  }
  // Run r of every recipe back to back, then run r + 1: their ratios share
  // the machine's load, and a slow spell spreads over all of them.
  for (int64_t rep = 0; rep < repetitions; ++rep) {
    for (RecipeRuns& r : all) {
      const std::string label = repetitions > 1 ? "run " + std::to_string(rep + 1) + "/" + std::to_string(repetitions) + ": " : "";
      const BenchRun run = run_bench(model, options, r.recipe, prompt, n_gen, sequences, label);
      r.runs.push_back(run);
      r.prefill_tps.push_back(double(sequences * n_prompt) / run.prefill_s);
      r.decode_tps.push_back(double(sequences * n_gen) / run.decode_s);
    }
  }
  const double mem = args.has("skip-memory") ? 0 : memory_read_gbps(options.threads);
  if (args.has("json")) print_json(*model, options, all, n_prompt, n_gen, repetitions, sequences, mem);  // one document
  else print_table(*model, options, all, n_prompt, n_gen, repetitions, sequences, mem);
  return 0;
}

}  // namespace kvg::cli
