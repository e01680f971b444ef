// The GPU forward pass: the same recipe as the CPU, so the same bits
// (tests/cuda/test_*.cpp; this file: the process and the build).
//
// Build tests (always run): the build says whether it has CUDA, and asking
// for CUDA where there is none fails with a clear kvg::Error. GPU tests skip
// visibly, with the reason, when no usable device is present; on a GPU they
// check every kernel against its CPU definition bit for bit (all weight
// formats, widths that are not multiples of 16), whole models (logits
// SHA-256 equal to the CPU's, for every chunking), and that KV moves between
// CPU and GPU through grafts without changing a bit.
#include "tests/cuda/fixtures.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "engine/graft_check.hpp"
#ifdef KVG_HAVE_CUDA
#include "kernels/cuda/device_memory.hpp"
#endif

namespace kvg {
namespace {

using namespace cuda_test;

// ---------------------------------------------------------------------------
// Process: CUDA must not be initialised before first use (PostgreSQL forks
// backends from a postmaster that has loaded the extension). Defined first,
// in the first file linked (tests/cuda/fixtures.hpp), so it also holds when
// the whole binary runs in one process: nothing before it has touched CUDA.
// The child, forked from a process whose static initialisation has run,
// must be able to use the GPU itself.

TEST(CudaProcess, ForkedChildCanInitialiseCuda) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0) << "fork failed";
  if (pid == 0) {  // real CUDA work, not just the probe's answer
    if (!cuda_device_available()) _exit(3);
#ifdef KVG_HAVE_CUDA
    try {
      cuda::Stream stream;
      cuda::DeviceBuffer buffer(4096);
      stream.synchronize();
    } catch (...) {
      _exit(1);
    }
#endif
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 3) GTEST_SKIP() << "no GPU in the forked child";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "CUDA was initialised before fork (at load or static initialisation)";
}

// ---------------------------------------------------------------------------
// Build: always run.

TEST(CudaBuild, ReportsWhetherKernelsWereCompiled) {
#ifdef KVG_HAVE_CUDA
  EXPECT_TRUE(cuda_compiled());
#else
  EXPECT_FALSE(cuda_compiled());
#endif
}

TEST(CudaBuild, AvailabilityComesWithAReason) {
  std::string why;
  const bool available = cuda_device_available(&why);
  EXPECT_FALSE(why.empty());
  if (!cuda_compiled()) {
    EXPECT_FALSE(available);
    EXPECT_NE(why.find("-DKVG_CUDA=ON"), std::string::npos) << why;
  }
  std::printf("cuda_device_available: %s — %s\n", available ? "yes" : "no", why.c_str());
}

TEST(CudaBuild, ConstructingWithoutADeviceFailsClearly) {
  std::string why;
  if (cuda_device_available(&why)) GTEST_SKIP() << "a GPU is present (" << why << "): the failure path is unreachable";
  auto model = synth_model("f32");
  try {
    CudaForward gpu(model, 64);
    FAIL() << "CudaForward was constructed without a usable device";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    const std::string message = e.what();
    EXPECT_NE(message.find(cuda_compiled() ? why : std::string("-DKVG_CUDA=ON")), std::string::npos) << message;
  }
}

// Session wiring without a device.

TEST(CudaBuild, SessionOnCudaWithoutADeviceFailsClearly) {
  std::string why;
  if (cuda_device_available(&why)) GTEST_SKIP() << "a GPU is present: the failure path is unreachable";
  EngineOptions options;
  KVG_REQUIRE_DEVICE_OPTION(options, "cuda");
  auto model = synth_model("f32");
  try {
    Session session(model, options);
    std::vector<float> logits;
    const int32_t bos[1] = {1};
    session.forward(bos, LogitsFor::Last, &logits);
    FAIL() << "a CUDA session ran without a usable device";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported) << e.what();
  }
}

TEST(CudaBuild, AutoDeviceGivesTheCpuBits) {
  EngineOptions options;
  KVG_REQUIRE_DEVICE_OPTION(options, "auto");
  auto model = synth_model("f32");
  const auto tokens = prompt_for(*model, 40);
  std::vector<float> cpu, automatic;
  Session(model, EngineOptions{}).prefill(tokens, 0, LogitsFor::All, &cpu);
  Session(model, options).prefill(tokens, 0, LogitsFor::All, &automatic);
  EXPECT_EQ(logits_sha256(automatic), logits_sha256(cpu));
}

}  // namespace
}  // namespace kvg
