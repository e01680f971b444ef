// The forward pass on a CUDA GPU, under the same recipe as the CPU forward
// pass (engine/forward.cpp), f32-portable-v1 or q8-portable-v1: the same
// logits bits, the same KV bits, for any chunking.
//
// The host KvCache stays authoritative, so capture and graft keep working on
// it unchanged. The device keeps a mirror of it: before a forward, rows of
// positions [0, p0) that the host has and the device does not (after a graft,
// or on first use) are uploaded; after it, the new rows [p0, p0 + n) are
// copied back into the host cache. Weights are uploaded once per Model object
// and stay on the device while it lives (Model::resident_state), shared by
// every CudaForward of that model in the process; a finished CudaForward
// leaves its stream, KV mirror, scratch and pinned staging to the next one of
// the same model, so a backend that builds a Session per SQL call neither
// re-uploads nor re-allocates.
//
// Plain C++ (no CUDA types); in a build without CUDA the constructor throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/kv_cache.hpp"
#include "engine/logits_for.hpp"
#include "engine/model.hpp"
#include "engine/recipe.hpp"
#include "kernels/cpu/kv_rounding.hpp"

namespace kvg {

class CudaForward;

// One CudaForward's share of a batched pass (CudaForward::forward_batch):
// forward()'s arguments.
struct CudaForwardPart {
  CudaForward* forward = nullptr;
  std::span<const int32_t> tokens;
  int64_t p0 = 0;
  LogitsFor which = LogitsFor::Last;
  std::vector<float>* logits = nullptr;
  KvCache* host_cache = nullptr;
};


class CudaForward {
 public:
  // Initialises CUDA in this process (never at load time), uploads the
  // model's weights unless this Model's are already on the device,
  // and prepares device KV for up to max_positions positions. Throws
  // kvg::Error(Unsupported) when this build has no CUDA support or no usable
  // device (with the reason), OutOfRange when device memory runs out.
  //
  // staging_bytes bounds each page-locked staging buffer that carries KV rows
  // and logits between host and device (pinned memory is taken from the
  // machine's RAM and cannot be swapped, and every backend has its own):
  // larger transfers go through it in chunks, with a wait per chunk.
  // There are kStagingBuffers of them (KV and logits down, KV up, rotary
  // tables up; the token ids' buffer is a few bytes per token), so a
  // backend's pinned memory is about kStagingBuffers * staging_bytes.
  static constexpr size_t kDefaultStagingBytes = size_t(64) << 20;
  // The CUDA kernels compute every recipe (engine/recipe.hpp): q8-portable-v1's
  // products of block-quantized weights through kernels/cuda/matmul_q8, and
  // every KV storage's rounding of new rows (kernels/cuda/kv_rounding.cu), as
  // the CPU does.
  static constexpr int kStagingBuffers = 3;
  CudaForward(std::shared_ptr<const Model> model, int64_t max_positions, Recipe recipe = kDefaultRecipe,
              size_t staging_bytes = kDefaultStagingBytes);
  ~CudaForward();
  CudaForward(const CudaForward&) = delete;
  CudaForward& operator=(const CudaForward&) = delete;

  // Evaluates `tokens` at positions p0.. exactly as Session::forward does on
  // the CPU. host_cache must hold valid rows for [0, p0); it receives the rows
  // of [p0, p0 + n). `logits` gets n_vocab floats per requested row. Token ids
  // must be in the vocabulary and p0 + n <= max_positions (else kvg::Error).
  // On any failure it waits for the work it queued before throwing, and
  // device_positions() does not advance (the host cache is not written).
  // One CudaForward mirrors one host cache (a Session's): when given a cache
  // at another address it starts over, but to switch between caches call
  // truncate(0) — an address can be reused by a new cache.
  void forward(std::span<const int32_t> tokens, int64_t p0, LogitsFor which, std::vector<float>* logits,
               KvCache& host_cache);

  // forward() of several CudaForwards of one model and recipe (each its own
  // session's) in one pass: their rows go through every product together,
  // so the weights are read once for all, while each part's rotary
  // embedding and attention run at its own positions against its own KV
  // mirror. Each part gets the bits forward() gives it alone. The pass runs
  // on the first part's stream and workspace. Every part's tokens are
  // checked before any device work; on any failure every part is as after
  // a failed forward() (host cache not written, device_positions() not
  // advanced). forward() is a pass of one part.
  static void forward_batch(std::span<const CudaForwardPart> parts);
  // Passes that carried more than one part, in this process.
  static int64_t batched_passes();

  // Forgets device rows of positions >= n: call whenever the host cache's
  // rows from n on may change other than through forward() (truncation).
  void truncate(int64_t n);

  // Positions [0, n) whose device rows equal the host cache's.
  int64_t device_positions() const;
  int64_t max_positions() const;
  // The GPU in use, e.g. "NVIDIA H200 (sm_90, 143771 MiB)".
  std::string device_name() const;
  // The recipe it computes (the constructor's).
  const Recipe& recipe() const;

  // How many times this process has uploaded a model's weights (once per
  // Model object used on the GPU): a server checks residency with it.
  static int64_t weight_uploads();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvg
