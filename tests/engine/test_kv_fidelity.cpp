// What a compact KV storage costs and saves (issue #14), measured, never
// asserted: a disabled test that prints one table. Run it on purpose:
//
//   build/tests/kvg_test_kv_fidelity --gtest_also_run_disabled_tests
//
// For stories260K, TinyStories-656K and a synthetic model with head_dim 64,
// under each KV storage: bytes per token, the artifact of 512 tokens, the
// largest |logit - fp64 reference| relative to the row's largest reference
// logit, KL(f32-KV || storage) and argmax agreement with the f32-KV logits
// over a few hundred tokens, and graft and prefill times against f32 (same
// run). KVG_KV_BENCH_OUT=DIR also keeps each 512-token artifact there as
// <model>-<storage>.kvga (for `zstd -b`, or the Python validator of
// docs/artifact-format.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>

#include "engine/graft.hpp"
#include "engine/memory_artifacts.hpp"
#include "engine/prompt.hpp"
#include "tests/support/data_paths.hpp"
#include "tests/support/logit_compare.hpp"
#include "tests/support/reference_forward.hpp"
#include "tests/support/synth_fixture.hpp"
#include "tools/synth_model.hpp"

namespace kvg {
namespace {

double seconds_of(const std::function<void()>& f, int reps) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Row {
  std::string model, storage;
  double bytes_per_token = 0, artifact_bytes = 0;
  double max_rel_error = 0, kl_mean = 0, kl_max = 0, argmax = 0;
  double graft_s = 0, prefill_s = 0;
};

// A story's tokens, repeated to n tokens.
std::vector<int32_t> prompt_of(const Model& model, size_t n) {
  const std::vector<int32_t> story = fresh_prompt(
      model, "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her "
             "red ball. One day, she saw a big dog. The dog was friendly and wanted to play too. Lily threw the "
             "ball and the dog ran after it. They played all day until the sun went down.");
  std::vector<int32_t> t;
  while (t.size() < n) t.insert(t.end(), story.begin() + (t.empty() ? 0 : 1), story.end());
  t.resize(n);
  return t;
}

void measure(const std::string& name, std::shared_ptr<const Model> model, std::vector<Row>& rows) {
  const ModelConfig& c = model->config();
  const int64_t artifact_tokens = std::min<int64_t>(512, c.n_ctx);
  const int64_t fidelity_tokens = std::min<int64_t>(300, c.n_ctx);
  const std::vector<int32_t> tokens = prompt_of(*model, size_t(artifact_tokens));
  const std::vector<int32_t> fidelity(tokens.begin(), tokens.begin() + fidelity_tokens);
  const std::vector<double> reference = test::reference_logits(*model, fidelity);
  std::vector<float> f32_logits;
  const char* out_dir = std::getenv("KVG_KV_BENCH_OUT");
  for (KvStorage storage : {KvStorage::F32, KvStorage::BF16, KvStorage::I8}) {
    EngineOptions options;
    options.recipe.kv = storage;
    Row r{name, kv_storage_name(storage)};
    std::vector<float> logits;
    Session(model, options).prefill(fidelity, 0, LogitsFor::All, &logits);
    if (storage == KvStorage::F32) f32_logits = logits;
    const int V = c.n_vocab;
    double kl_sum = 0;
    int64_t same = 0;
    for (int64_t t = 0; t < fidelity_tokens; ++t) {
      const float* row = &logits[size_t(t * V)];
      const double* ref = &reference[size_t(t * V)];
      double top = 0, err = 0;
      for (int i = 0; i < V; ++i) top = std::max(top, std::fabs(ref[i]));
      for (int i = 0; i < V; ++i) err = std::max(err, std::fabs(double(row[i]) - ref[i]));
      r.max_rel_error = std::max(r.max_rel_error, err / top);
      const double kl = test::kl_divergence(test::log_softmax(&f32_logits[size_t(t * V)], V), test::log_softmax(row, V));
      kl_sum += kl;
      r.kl_max = std::max(r.kl_max, kl);
      same += std::max_element(row, row + V) - row == std::max_element(&f32_logits[size_t(t * V)], &f32_logits[size_t(t * V)] + V) - &f32_logits[size_t(t * V)];
    }
    r.kl_mean = kl_sum / double(fidelity_tokens);
    r.argmax = double(same) / double(fidelity_tokens);

    MemoryArtifacts store;
    Session source(model, options);
    r.prefill_s = seconds_of([&] {
      source.truncate(0);
      source.prefill(tokens, 0, LogitsFor::None, nullptr);
    }, 3);
    const Digest id = store.capture_from(source, 0, artifact_tokens);
    r.artifact_bytes = double(store.bytes[id].size());
    r.bytes_per_token = double(parse_header(store.bytes[id]).layer_bytes()) * c.n_layer / double(artifact_tokens);
    Session target(model, options);
    target.kv_cache().reserve(artifact_tokens);
    r.graft_s = seconds_of([&] {
      target.truncate(0);
      graft(target, id, store.opener());
    }, 15);
    if (out_dir) {
      std::ofstream f(std::string(out_dir) + "/" + name + "-" + r.storage + ".kvga", std::ios::binary);
      f.write(reinterpret_cast<const char*>(store.bytes[id].data()), std::streamsize(store.bytes[id].size()));
    }
    rows.push_back(r);
  }
}

TEST(KvStorageBench, DISABLED_FidelityAndSize) {
  std::vector<Row> rows;
  for (const char* path : {test::kStories260K, test::kTinyStories656K}) {
    if (!test::has_data(path)) continue;
    measure(std::string(path).find("260K") != std::string::npos ? "stories260K" : "TinyStories-656K",
            Model::load(test::data_path(path)), rows);
  }
  SynthOptions o;
  o.n_embd = 256;
  o.n_layer = 4;
  o.n_head = 4;  // head_dim 64
  o.n_head_kv = 2;
  o.n_ff = 512;
  o.n_vocab = 512;
  o.n_ctx = 1024;
  o.seed = 11;
  measure("synth-hd64", test::load_synth(o, "kv-fidelity-hd64"), rows);

  std::printf("\n%-17s %-5s %9s %12s %12s %10s %10s %8s %9s %9s %10s %10s\n", "model", "kv", "B/token",
              "artifact@512", "max|err|/top", "KL mean", "KL max", "argmax", "graft ms", "vs f32", "prefill ms",
              "vs f32");
  double graft_f32 = 0, prefill_f32 = 0;
  for (const Row& r : rows) {
    if (r.storage == "f32") graft_f32 = r.graft_s, prefill_f32 = r.prefill_s;
    std::printf("%-17s %-5s %9.0f %12.0f %12.3e %10.2e %10.2e %7.2f%% %9.3f %9.2f %10.2f %10.2f\n", r.model.c_str(),
                r.storage.c_str(), r.bytes_per_token, r.artifact_bytes, r.max_rel_error, r.kl_mean, r.kl_max,
                100 * r.argmax, 1e3 * r.graft_s, r.graft_s / graft_f32, 1e3 * r.prefill_s, r.prefill_s / prefill_f32);
  }
}

}  // namespace
}  // namespace kvg
