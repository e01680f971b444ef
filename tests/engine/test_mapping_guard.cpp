// A model file truncated while it is mapped and read (engine/gguf/mapping_guard.hpp):
// the read finds zeros instead of raising a fatal SIGBUS, the mapping is marked
// damaged, and the forward pass fails with an error naming the file. A SIGBUS
// anywhere else still ends the process.
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "engine/gguf/mapping_guard.hpp"
#include "engine/session.hpp"
#include "kernels/cpu/thread_pool.hpp"
#include "tests/support/data_paths.hpp"
#include "tests/support/synth_fixture.hpp"

namespace kvg {
namespace {

constexpr size_t kFileBytes = 64 * 1024;

// A file of kFileBytes bytes of 0xAB, mapped read-only and shared as the GGUF
// reader maps a model.
struct MappedFile {
  std::string path;
  int fd = -1;
  const volatile uint8_t* bytes = nullptr;

  explicit MappedFile(const std::string& name) : path(test::temp_dir(name) + "/file.bin") {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    std::vector<uint8_t> fill(kFileBytes, 0xAB);
    EXPECT_EQ(::write(fd, fill.data(), fill.size()), ssize_t(fill.size()));
    void* p = ::mmap(nullptr, kFileBytes, PROT_READ, MAP_SHARED, fd, 0);
    EXPECT_NE(p, MAP_FAILED);
    bytes = static_cast<const volatile uint8_t*>(p);
  }
  ~MappedFile() {
    ::munmap(const_cast<uint8_t*>(bytes), kFileBytes);
    ::close(fd);
  }
  void truncate_to(off_t size) const { ASSERT_EQ(::ftruncate(fd, size), 0); }
};

TEST(MappingGuard, AReadPastTheCutOfAGuardedMappingFindsZerosAndMarksIt) {
  MappedFile file("guard_main_thread");
  gguf::MappingGuard guard(const_cast<uint8_t*>(file.bytes), kFileBytes);
  ASSERT_TRUE(guard.guarded());
  EXPECT_EQ(file.bytes[8192], 0xAB);
  EXPECT_FALSE(guard.damaged());
  file.truncate_to(4096);
  EXPECT_EQ(file.bytes[8192], 0);  // SIGBUS without the guard
  EXPECT_EQ(file.bytes[kFileBytes - 1], 0);
  EXPECT_TRUE(guard.damaged());
  EXPECT_EQ(file.bytes[100], 0xAB);  // before the faulting page: still the file
}

TEST(MappingGuard, WorkerThreadsLeaveTheFaultSignalsOpenAndReachTheGuard) {
  MappedFile file("guard_worker");
  gguf::MappingGuard guard(const_cast<uint8_t*>(file.bytes), kFileBytes);
  file.truncate_to(0);
  ThreadPool pool(2);
  const std::thread::id main_thread = std::this_thread::get_id();
  std::atomic<int> worker_reads{0}, fault_signals_blocked{0};
  std::atomic<unsigned> sum{0};
  // Every task waits a little, so the worker takes some of them.
  pool.run(64, [&](size_t task) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (std::this_thread::get_id() == main_thread) return;
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, nullptr, &mask);
    for (int sig : {SIGBUS, SIGSEGV, SIGFPE, SIGILL}) fault_signals_blocked += sigismember(&mask, sig);
    sum += file.bytes[(task * 1024) % kFileBytes];
    ++worker_reads;
  });
  ASSERT_GT(worker_reads.load(), 0) << "the worker ran no task";
  EXPECT_EQ(fault_signals_blocked.load(), 0);
  EXPECT_EQ(sum.load(), 0u);
  EXPECT_TRUE(guard.damaged());
}

TEST(MappingGuardDeathTest, ASigbusOutsideEveryGuardedMappingStillEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        MappedFile guarded("guard_death_guarded");
        gguf::MappingGuard guard(const_cast<uint8_t*>(guarded.bytes), kFileBytes);  // the handler is installed
        MappedFile unguarded("guard_death_unguarded");
        unguarded.truncate_to(0);
        std::printf("%d\n", unguarded.bytes[8192]);
      },
      ::testing::KilledBySignal(SIGBUS), "");
}

TEST(MappingGuard, AModelTruncatedUnderASessionFailsTheForwardPassNamingTheFile) {
  SynthOptions options = test::tiny_synth_options();
  options.n_layer = 2;
  options.n_vocab = 2000;  // the embedding spans many pages
  const std::string dir = test::temp_dir("guard_model");
  const std::string path = dir + "/model.gguf";
  write_synth_model(options, path);
  std::shared_ptr<const Model> model = Model::load(path);
  EngineOptions engine;
  engine.threads = 2;
  Session session(model, engine);
  std::vector<float> logits;
  const std::vector<int32_t> tokens = {1, 300, 301, 302};
  session.forward(tokens, LogitsFor::Last, &logits);
  EXPECT_TRUE(model->weights_intact());

  std::filesystem::resize_file(path, 4096);  // in place, as `truncate -s 4096` does
  Session after(model, engine);
  try {
    after.forward(tokens, LogitsFor::Last, &logits);
    FAIL() << "the forward pass read a truncated file without an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Io);
    const std::string what = e.what();
    EXPECT_NE(what.find("'" + path + "' was truncated while in use"), std::string::npos) << what;
  }
  EXPECT_FALSE(model->weights_intact());
  EXPECT_THROW(model->check_weights_intact(), Error);

  // Written again, the file loads again; the damaged Model stays damaged.
  write_synth_model(options, path);
  std::shared_ptr<const Model> reloaded = Model::load(path);
  Session fresh(reloaded, engine);
  std::vector<float> again;
  fresh.forward(tokens, LogitsFor::Last, &again);
  EXPECT_TRUE(reloaded->weights_intact());
  EXPECT_FALSE(model->weights_intact());
}

}  // namespace
}  // namespace kvg
