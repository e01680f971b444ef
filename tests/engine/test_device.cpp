// engine/device.hpp: what the extension and the CLI report as "the device"
// must be what a Session really does with the same request.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>

#include <stdexcept>
#include <thread>

#include "common/error.hpp"
#include "engine/device.hpp"
#include "engine/session.hpp"
#include "kernels/cuda/signal_block.hpp"
#include "tests/support/synth_fixture.hpp"
#include "tools/synth_model.hpp"

namespace kvg {
namespace {

std::shared_ptr<const Model> tiny_model() {
  static std::shared_ptr<const Model> model = test::load_synth(test::tiny_synth_options(), "device");
  return model;
}

TEST(Device, NamesRoundTrip) {
  for (Device d : {Device::Cpu, Device::Cuda, Device::Auto}) EXPECT_EQ(parse_device(device_name(d)), d);
  EXPECT_FALSE(parse_device("gpu"));
  EXPECT_FALSE(parse_device("CPU"));
}

TEST(Device, CpuIsAlwaysCompiledAndAvailable) {
  EXPECT_TRUE(device_compiled(Device::Cpu));
  EXPECT_TRUE(device_available(Device::Cpu));
  const DeviceChoice choice = resolve_device(Device::Cpu);
  EXPECT_EQ(choice.runs_on, Device::Cpu);
  EXPECT_EQ(choice.detail, "");
}

TEST(Device, CudaIsUsableOnlyWhenCompiledAndPresent) {
  std::string why;
  const bool available = device_available(Device::Cuda, &why);
  EXPECT_FALSE(why.empty());  // the GPU's name, or why there is none
  if (!device_compiled(Device::Cuda)) {
    EXPECT_FALSE(available);
  }
  const DeviceChoice cuda = resolve_device(Device::Cuda);
  EXPECT_EQ(cuda.runs_on.has_value(), available);
  if (available) {
    EXPECT_EQ(*cuda.runs_on, Device::Cuda);
  }
  EXPECT_EQ(cuda.detail, why);
  // auto never refuses: the GPU when usable, else the CPU.
  EXPECT_EQ(resolve_device(Device::Auto).runs_on, available ? Device::Cuda : Device::Cpu);
}

// The report and the behaviour agree: a Session refuses exactly the requests
// resolve_device refuses, with its reason.
TEST(Device, SessionFollowsTheResolution) {
  for (Device requested : {Device::Cpu, Device::Cuda, Device::Auto}) {
    SCOPED_TRACE(device_name(requested));
    const DeviceChoice choice = resolve_device(requested);
    EngineOptions options;
    options.device = requested;
    try {
      Session session(tiny_model(), options);
      EXPECT_TRUE(choice.runs_on.has_value()) << "a session ran where resolve_device said it would be refused";
    } catch (const Error& e) {
      EXPECT_FALSE(choice.runs_on.has_value()) << e.what();
      EXPECT_EQ(e.code(), ErrorCode::Unsupported);
      EXPECT_NE(std::string(e.what()).find(choice.detail), std::string::npos) << e.what();
    }
  }
}

// kernels/cuda/signal_block.hpp: CUDA's driver threads inherit the mask of
// the thread that creates them, so every signal is blocked while CUDA starts.
sigset_t current_mask() {
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  return mask;
}

TEST(SignalBlock, BlocksEverySignalInsideAndRestoresTheMaskAfter) {
  // The thread's own mask beforehand: SIGUSR2 blocked, SIGINT open.
  sigset_t usr2, saved;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &usr2, &saved);
  sigset_t open_int;
  sigemptyset(&open_int);
  sigaddset(&open_int, SIGINT);
  pthread_sigmask(SIG_UNBLOCK, &open_int, nullptr);
  const sigset_t before = current_mask();
  bool thread_saw_blocked = false;
  {
    const cuda::SignalBlock guard;
    const sigset_t inside = current_mask();
    for (int sig : {SIGINT, SIGTERM, SIGALRM, SIGUSR1, SIGUSR2, SIGHUP, SIGQUIT, SIGCHLD})
      EXPECT_EQ(sigismember(&inside, sig), 1) << "signal " << sig << " open inside the guard";
    // Except the fault signals: blocked, a fault kills the process whatever
    // the handler (common/fault_signals.hpp).
    for (int sig : {SIGBUS, SIGSEGV, SIGFPE, SIGILL})
      EXPECT_EQ(sigismember(&inside, sig), 0) << "fault signal " << sig << " blocked inside the guard";
    // What the guard is for: a thread started inside (as the CUDA driver
    // starts its own) is born with everything blocked and keeps it.
    std::thread([&] {
      const sigset_t mask = current_mask();
      thread_saw_blocked = sigismember(&mask, SIGINT) == 1 && sigismember(&mask, SIGTERM) == 1 &&
                           sigismember(&mask, SIGALRM) == 1;
    }).join();
  }
  EXPECT_TRUE(thread_saw_blocked);
  const sigset_t after = current_mask();
  for (int sig = 1; sig < NSIG; ++sig)
    EXPECT_EQ(sigismember(&after, sig), sigismember(&before, sig)) << "signal " << sig << " not restored";
  EXPECT_EQ(sigismember(&after, SIGINT), 0);
  EXPECT_EQ(sigismember(&after, SIGUSR2), 1);

  // Restored when leaving by an exception too.
  try {
    const cuda::SignalBlock guard;
    throw std::runtime_error("CUDA initialisation failed");
  } catch (const std::runtime_error&) {
  }
  const sigset_t after_throw = current_mask();
  for (int sig = 1; sig < NSIG; ++sig)
    EXPECT_EQ(sigismember(&after_throw, sig), sigismember(&before, sig)) << "signal " << sig << " after a throw";
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
}

}  // namespace
}  // namespace kvg
