// Shared by the CUDA executor's tests (tests/cuda/test_*.cpp, one
// executable: kvg_test_cuda, or kvg_test_cuda_emulated under
// kernels/cuda/emulator/run.sh): the skip macros, the prompts and synthetic
// models every concern uses, and the evaluations that compare a GPU run
// with the CPU's.
//
// The files are linked, and so run, in the order of their numbers:
// test_01_build.cpp first, whose fork test must run before anything in the
// process has touched CUDA.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/cuda_forward.hpp"
#include "engine/graft_check.hpp"
#include "engine/kv_cache.hpp"
#include "engine/model.hpp"
#include "engine/recipe.hpp"
#include "engine/session.hpp"
#include "kernels/cuda/cuda_runtime_probe.hpp"
#include "tests/support/data_paths.hpp"

// Skips the current test, with the reason, when no usable GPU is present.
#define KVG_REQUIRE_GPU()                                                        \
  do {                                                                           \
    std::string kvg_why_;                                                        \
    if (!::kvg::cuda_device_available(&kvg_why_)) GTEST_SKIP() << "no GPU: " << kvg_why_; \
  } while (0)

namespace kvg::cuda_test {

// A prompt of `length` ids: BOS, then ids spread over the vocabulary.
std::vector<int32_t> prompt_for(const Model& model, size_t length, size_t step = 7919);

// A small synthetic model of one weight format and family: "f32", "q4_k",
// ... and "f16-qwen2" (q/k/v biases, NeoX rotary), written to a temporary
// file and loaded (a new Model each call).
std::shared_ptr<const Model> synth_model(const std::string& variant);

// Session wiring. EngineOptions::device (enum class Device { Cpu, Cuda, Auto })
// selects the forward pass; until Session has it, these tests skip.

template <class Options>
bool select_device(Options& options, const char* which) {
  if constexpr (requires { options.device; }) {
    using Device = decltype(options.device);
    options.device = std::string(which) == "cuda" ? Device::Cuda : Device::Auto;
    return true;
  } else {
    return false;
  }
}

#define KVG_REQUIRE_DEVICE_OPTION(options, which)                                         \
  do {                                                                                    \
    if (!::kvg::cuda_test::select_device(options, which)) GTEST_SKIP() << "EngineOptions has no device field yet"; \
  } while (0)

// The CPU's q8-portable-v1 recipe with f32 KV.
inline const Recipe kQ8Recipe{Arithmetic::Q8, KvStorage::F32};

// Whole models on the GPU against the CPU: the logits of every position and
// the KV cache they leave.
struct Evaluation {
  std::vector<float> logits;
  std::unique_ptr<KvCache> cache;
};

EngineOptions under(const Recipe& recipe);

// A CPU Session's prefill of `tokens`, `chunk` at a time (0: at once).
Evaluation cpu_run(std::shared_ptr<const Model> model, const std::vector<int32_t>& tokens, int64_t chunk,
                   const Recipe& recipe = kDefaultRecipe);

// CudaForward driven the way a Session drives it: chunk after chunk.
Evaluation gpu_run(CudaForward& gpu, const Model& model, const std::vector<int32_t>& tokens, int64_t chunk);

// Whether the first `positions` rows of K and V are the same bits.
bool same_kv(const KvCache& a, const KvCache& b, int64_t positions);

}  // namespace kvg::cuda_test
