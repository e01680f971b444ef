// Device errors (emulator only): failures injected into the SIMT
// emulator's runtime, and what Device::Auto and Device::Cuda make of them.
#include "tests/cuda/fixtures.hpp"

#ifdef KVG_CUDA_EMULATOR
#include <pthread.h>
#include <signal.h>

#include <span>

#include "engine/device.hpp"
#include "kernels/cuda/emulator/include/mock_control.hpp"
#endif

namespace kvg {
namespace {

using namespace cuda_test;

#ifdef KVG_CUDA_EMULATOR

// Failures injected into the emulator's runtime (emulator/mock_runtime.cpp).
class CudaFailure : public ::testing::Test {
 protected:
  void TearDown() override {
    cuda::mock::clear_failures();
    detail::cuda_forget_unusable_for_tests();
    last_device_fallback();
  }
  static EngineOptions on(Device device) {
    EngineOptions o;
    o.device = device;
    return o;
  }
};

TEST_F(CudaFailure, AutoRunsOnTheCpuWhenTheWeightsDoNotFit) {
  auto model = synth_model("f32");  // a new Model: its weights are not on the device yet
  const auto tokens = prompt_for(*model, 9);
  std::vector<float> cpu, automatic;
  Session(model, EngineOptions{}).prefill(tokens, 0, LogitsFor::All, &cpu);

  cuda::mock::fail(cuda::mock::Op::DeviceAlloc, cuda::mock::kMemoryAllocation, 3);
  Session session(model, on(Device::Auto));
  EXPECT_EQ(session.runs_on(), Device::Cpu);
  EXPECT_NE(session.device_fallback().find("cudaMalloc"), std::string::npos) << session.device_fallback();
  EXPECT_EQ(last_device_fallback(), session.device_fallback());
  session.prefill(tokens, 0, LogitsFor::All, &automatic);
  EXPECT_EQ(logits_sha256(automatic), logits_sha256(cpu));
  // Out of memory is not sticky: the device stays in use for later sessions.
  EXPECT_TRUE(cuda_device_available());
  EXPECT_EQ(Session(model, on(Device::Auto)).runs_on(), Device::Cuda);

  // Asked for explicitly, the GPU's failure is the call's.
  auto another = synth_model("f32");
  cuda::mock::fail(cuda::mock::Op::DeviceAlloc, cuda::mock::kMemoryAllocation, 0);
  try {
    Session refused(another, on(Device::Cuda));
    FAIL() << "a cuda session was built although its weights did not fit";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::OutOfRange) << e.what();
  }
}

TEST_F(CudaFailure, AutoRunsOnTheCpuWhenTheKvMirrorDoesNotFit) {
  auto model = synth_model("f32");
  const auto tokens = prompt_for(*model, 11);
  std::vector<float> cpu;
  Session(model, EngineOptions{}).prefill(tokens, 0, LogitsFor::All, &cpu);
  for (Device device : {Device::Auto, Device::Cuda}) {
    Session session(model, on(device));
    ASSERT_EQ(session.runs_on(), Device::Cuda);
    // The first forward allocates the KV mirror (the first device allocation
    // left: the weights are resident and the workspace starts empty or reused
    // after a failure freed it).
    cuda::mock::fail(cuda::mock::Op::DeviceAlloc, cuda::mock::kMemoryAllocation, 0);
    std::vector<float> logits;
    if (device == Device::Cuda) {
      try {
        session.prefill(tokens, 0, LogitsFor::All, &logits);
        FAIL() << "the forward pass ran although its KV mirror did not fit";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::OutOfRange) << e.what();
      }
      EXPECT_EQ(session.n_past(), 0);
      continue;
    }
    session.prefill(tokens, 0, LogitsFor::All, &logits);
    EXPECT_EQ(session.runs_on(), Device::Cpu);
    EXPECT_NE(session.device_fallback().find("out of memory"), std::string::npos) << session.device_fallback();
    EXPECT_EQ(logits_sha256(logits), logits_sha256(cpu));
  }
}

TEST_F(CudaFailure, AStickyErrorRetiresTheDeviceForTheProcess) {
  auto model = synth_model("f32");
  const auto tokens = prompt_for(*model, 12);
  const ModelConfig& c = model->config();
  KvCache host(c.n_layer, c.kv_row_floats(), 64);
  CudaForward gpu(model, 64);
  std::vector<float> logits;
  gpu.forward(std::span<const int32_t>(tokens.data(), 8), 0, LogitsFor::Last, &logits, host);
  ASSERT_EQ(gpu.device_positions(), 8);

  // A kernel fault surfaces at the copy back; the forward pass must wait for
  // what it queued before throwing (one synchronisation: nothing else in this
  // call synchronises before the copy) and keep its valid range.
  cuda::mock::fail(cuda::mock::Op::CopyToHost, cuda::mock::kIllegalAddress);
  const int64_t syncs = cuda::mock::counters().synchronizations;
  try {
    gpu.forward(std::span<const int32_t>(tokens.data() + 8, 4), 8, LogitsFor::Last, &logits, host);
    FAIL() << "the injected fault was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Internal) << e.what();
  }
  EXPECT_EQ(cuda::mock::counters().synchronizations - syncs, 1);
  EXPECT_EQ(gpu.device_positions(), 8);

  std::string why;
  EXPECT_FALSE(cuda_device_available(&why));
  EXPECT_NE(why.find("failed earlier in this process"), std::string::npos) << why;
  EXPECT_NE(why.find("status 700"), std::string::npos) << why;
  EXPECT_EQ(resolve_device(Device::Auto).runs_on, Device::Cpu);
  try {
    Session refused(model, on(Device::Cuda));
    FAIL() << "a cuda session was built on a retired device";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("failed earlier"), std::string::npos) << e.what();
  }
  std::vector<float> cpu, automatic;
  Session(model, EngineOptions{}).prefill(tokens, 0, LogitsFor::All, &cpu);
  Session fallback(model, on(Device::Auto));
  EXPECT_EQ(fallback.runs_on(), Device::Cpu);
  fallback.prefill(tokens, 0, LogitsFor::All, &automatic);
  EXPECT_EQ(logits_sha256(automatic), logits_sha256(cpu));
}

TEST_F(CudaFailure, AFailedUploadDoesNotAdvanceTheMirror) {
  auto model = synth_model("f32");
  const auto tokens = prompt_for(*model, 12);
  Session cpu(model, EngineOptions{});
  std::vector<float> expected;
  cpu.prefill(tokens, 0, LogitsFor::Last, &expected);
  CudaForward gpu(model, 64);
  // Rows [0, 8) are on the host only (as after a graft): the next forward
  // uploads them, computes, and fails copying back (out of memory: not
  // sticky). The upload was queued, but the range grows only after the final
  // synchronisation, so none of it counts.
  KvCache& host = cpu.kv_cache();
  cuda::mock::fail(cuda::mock::Op::CopyToHost, cuda::mock::kMemoryAllocation);
  std::vector<float> logits;
  EXPECT_THROW(gpu.forward(std::span<const int32_t>(tokens.data() + 8, 4), 8, LogitsFor::Last, &logits, host), Error);
  EXPECT_EQ(gpu.device_positions(), 0);
  // Retried, it uploads them again and gives the CPU's bits.
  gpu.forward(std::span<const int32_t>(tokens.data() + 8, 4), 8, LogitsFor::Last, &logits, host);
  EXPECT_EQ(gpu.device_positions(), 12);
  EXPECT_EQ(logits_sha256(logits), logits_sha256(expected));
}

TEST_F(CudaFailure, StreamsAreCreatedWithEverySignalBlocked) {
  sigset_t before, after;
  pthread_sigmask(SIG_BLOCK, nullptr, &before);
  const int64_t streams = cuda::mock::counters().streams_created;
  auto model = synth_model("f32");  // new Model: weights stream and a new workspace stream
  Session session(model, on(Device::Cuda));
  EXPECT_GT(cuda::mock::counters().streams_created, streams);
  EXPECT_EQ(cuda::mock::counters().signals_unblocked_at_stream_creation, 0);
  pthread_sigmask(SIG_BLOCK, nullptr, &after);
  for (int sig : {SIGINT, SIGTERM, SIGALRM, SIGUSR1})
    EXPECT_EQ(sigismember(&after, sig), sigismember(&before, sig)) << "signal " << sig;
}

#endif  // KVG_CUDA_EMULATOR

}  // namespace
}  // namespace kvg
