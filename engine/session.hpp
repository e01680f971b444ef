// One inference context over a model: the KV cache, the token history and the
// forward pass. Evaluating a prompt in one call, in chunks, or after grafting
// part of its KV from an artifact gives bit-identical logits (docs/recipe.md).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/cuda_forward.hpp"
#include "engine/device.hpp"
#include "engine/kv_cache.hpp"
#include "engine/kv_storage.hpp"
#include "engine/logits_for.hpp"
#include "engine/model.hpp"
#include "engine/progress.hpp"
#include "engine/recipe.hpp"
#include "kernels/cpu/isa.hpp"
#include "kernels/cpu/rope_table.hpp"
#include "kernels/cpu/thread_pool.hpp"

namespace kvg {

class MappedKv;

struct EngineOptions {
  // The arithmetic (engine/recipe.hpp): every artifact this session captures
  // and every graft into it is of this recipe.
  Recipe recipe = kDefaultRecipe;
  Device device = Device::Cpu;  // resolved by resolve_device() (engine/device.hpp)
  int threads = 1;
  Isa isa = default_isa();
  int64_t max_context = 0;  // positions this session reserves for; 0: as many as context_limit allows
  // The most positions any context may reach; 0: the model's context_length.
  // Above it the positions are past what the model was trained on: the
  // arithmetic is the same (and as exact), the quality is the model's
  // (docs/long-context.md).
  int64_t context_limit = 0;
  // On a GPU: the bound on each pinned staging buffer (CudaForward).
  size_t gpu_staging_bytes = CudaForward::kDefaultStagingBytes;
  // The most bytes this context's KV cache may take (0: unbounded); a context
  // that would need more is refused before it is allocated. `kv_limit_name`
  // names the setting in that error (kvg.max_kv_memory, --max-kv-memory).
  int64_t max_kv_bytes = 0;
  const char* kv_limit_name = "the KV memory limit";
  // The `threads` threads to run on, when sessions share them: the sessions
  // of a process that never runs two passes at once (the engine worker) use
  // one pool rather than each starting threads of its own. Null: the session
  // makes its own. The same bits either way (recipe rule: threads change
  // nothing).
  std::shared_ptr<ThreadPool> pool;
  // Whether a pass too small to gain from threads runs on the calling thread
  // alone (engine/pass_threads.hpp). The server's sessions do. The default
  // does not: the CLI's --threads N runs N (kvg bench -t measures what it
  // says), and a test that asks for threads runs the threaded paths whatever
  // the size of its model. The same bits either way.
  bool small_passes_inline = false;
};

class Session;

// The positions a session with `options` may hold: max_context within
// context_limit (the model's context_length when 0).
int64_t positions_reached(const Model& model, const EngineOptions& options);

// One session's tokens in a batched forward pass (Session::forward_batch).
struct ForwardRequest {
  Session* session = nullptr;
  std::span<const int32_t> tokens;
  LogitsFor which = LogitsFor::Last;
  std::vector<float>* logits = nullptr;
};

class Session {
 public:
  // Throws kvg::Error(Unsupported) when options.device cannot be used
  // (resolve_device() says why). Under Device::Auto any failure to set up the
  // GPU, running out of device memory included, makes the session run on the
  // CPU instead (the same bits); device_fallback() and
  // last_device_fallback() (engine/device.hpp) say why.
  Session(std::shared_ptr<const Model> model, EngineOptions options);

  const Model& model() const { return *model_; }
  // The model shared, for a scratch session over the same weights (engine/positional_compose.cpp).
  std::shared_ptr<const Model> shared_model() const { return model_; }
  const EngineOptions& options() const { return options_; }
  // Where forward() runs: Cpu or Cuda (Auto resolved).
  Device runs_on() const { return cuda_ ? Device::Cuda : Device::Cpu; }
  // Why a Device::Auto session runs on the CPU although a GPU was found
  // (setting it up failed, e.g. out of device memory); empty otherwise.
  const std::string& device_fallback() const { return fallback_; }
  int64_t n_past() const { return int64_t(tokens_.size()); }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int64_t max_context() const { return cache_.max_positions(); }

  // Evaluates tokens at positions n_past().. in one forward pass, appending
  // their KV. `logits` receives n_vocab floats per requested row (all tokens
  // or the last one), row-major.
  void forward(std::span<const int32_t> tokens, LogitsFor which, std::vector<float>* logits);

  // forward() for several sessions in one pass: every request's rows go
  // through each matrix product together, so the weights are read once for
  // all of them. Each session's logits and KV rows are those forward() on it
  // alone gives, bit for bit (every step is row-independent: docs/design.md).
  // The sessions share one model, recipe and ISA, run on one device and
  // appear once each; the first request's session runs the pass on its
  // threads, or on CUDA its workspace and stream (CudaForward::forward_batch).
  // Requests without tokens are skipped (their logits cleared).
  static void forward_batch(std::span<const ForwardRequest> requests);

  // forward() in chunks of `chunk` tokens (0: all at once), calling `check`
  // before each chunk and `report` (tokens of this call) before and after
  // each. Logits rows are concatenated as if one call.
  void prefill(std::span<const int32_t> tokens, int64_t chunk, LogitsFor which, std::vector<float>* logits,
               const ProgressCheck& check = {}, const ProgressReport& report = {});

  // Refuses (InvalidArgument) token ids outside the vocabulary and more
  // tokens than the context has room for after n_past(): what forward()
  // checks before it computes anything.
  void check_tokens(std::span<const int32_t> tokens) const;

  // Forgets positions >= n (their KV rows become garbage to overwrite).
  void truncate(int64_t n);

  // Direct KV access for capture and graft (engine/graft.hpp).
  KvCache& kv_cache() { return cache_; }
  const KvCache& kv_cache() const { return cache_; }
  // Declares positions [n_past, n_past + tokens.size()) filled by a graft
  // that has already written their KV rows.
  void append_grafted(std::span<const int32_t> tokens);

  // Makes `mapped`'s positions [0, n) this empty session's first positions,
  // read in place by attention; the cache then holds positions n.. only
  // (engine/mapped_kv.hpp: use graft_mapped()). CPU sessions only.
  void map_prefix(std::shared_ptr<const MappedKv> mapped);
  // Positions below this are read from the mapped chain (0: none).
  int64_t mapped_end() const { return cache_.first_position(); }

 private:
  struct Scratch;  // the CPU executor's activations (engine/forward.cpp)
  // Hands a finished session's activations to the next session made on the
  // same thread (engine/forward.cpp).
  struct ScratchRelease {
    void operator()(Scratch* scratch) const;
    static std::unique_ptr<Scratch>& spare();  // this thread's
  };
  // The CPU executor (engine/forward.cpp): each part's tokens at its
  // session's n_past().., their KV rows into its cache; the callers append
  // them to the histories. Run by parts[0].session, which must be this.
  void forward_cpu(std::span<const ForwardRequest> parts);
  static void forward_cuda_batch(std::span<const ForwardRequest> parts);
  void add_residual(const std::vector<float>* post_norm, int64_t token, Isa isa);
  void norm_row(const float* x, const std::vector<float>& w, const std::vector<float>& b, float* y, Isa isa) const;

  std::shared_ptr<const Model> model_;
  EngineOptions options_;
  std::shared_ptr<ThreadPool> pool_;  // options.pool, or its own
  RopeTable rope_;        // global layers
  RopeTable rope_local_;  // sliding-window layers (the same table unless the model gives them their own base)
  KvCache cache_;
  std::vector<int32_t> tokens_;
  std::unique_ptr<Scratch, ScratchRelease> scratch_;  // taken by the CPU executor's first call
  std::shared_ptr<const MappedKv> mapped_;  // the chain positions [0, mapped_end()) are read from
  // Set when the forward pass runs on a GPU (EngineOptions::device); it
  // mirrors cache_, which stays authoritative for capture and graft.
  std::shared_ptr<CudaForward> cuda_;
  std::string fallback_;
};

}  // namespace kvg
