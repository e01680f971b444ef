// kernels/cuda/device_memory.hpp and the device probe for the SIMT
// emulator: the emulated kernels run on the CPU, so device memory is host
// memory. New allocations are filled with 0xff bytes (NaN floats), so a
// kernel or the forward pass reading device memory nobody wrote shows up as
// NaN logits instead of passing by luck.
//
// It also counts transfers and allocations and injects failures on request
// (include/mock_control.hpp), classifying them as device_memory.cu does.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

#include "common/error.hpp"
#include "kernels/cuda/cuda_runtime_probe.hpp"
#include "kernels/cuda/device_memory.hpp"
#include "kernels/cuda/signal_block.hpp"
#include "mock_control.hpp"

namespace kvg::cuda {

namespace mock {
namespace {
std::mutex mutex;
Counters totals;
struct Pending {
  bool armed = false;
  int status = 0;
  int skip = 0;
};
std::array<Pending, 6> pending;

// The status the next call of `op` returns (0: success).
int next_status(Op op) {
  std::lock_guard<std::mutex> lock(mutex);
  Pending& p = pending[size_t(op)];
  if (!p.armed) return 0;
  if (p.skip > 0) {
    --p.skip;
    return 0;
  }
  p.armed = false;
  return p.status;
}

template <class F>
void count(F&& f) {
  std::lock_guard<std::mutex> lock(mutex);
  f(totals);
}
}  // namespace

Counters counters() {
  std::lock_guard<std::mutex> lock(mutex);
  return totals;
}
void reset_largest_pinned() {
  std::lock_guard<std::mutex> lock(mutex);
  totals.largest_pinned_bytes = 0;
}
void fail(Op op, int status, int skip) {
  std::lock_guard<std::mutex> lock(mutex);
  pending[size_t(op)] = Pending{true, status, skip};
}
void clear_failures() {
  std::lock_guard<std::mutex> lock(mutex);
  pending = {};
}
}  // namespace mock

// As device_memory.cu: an allocation failure is not sticky; anything else
// makes the process stop using the device.
void check_status(int status, const char* what) {
  if (status == 0) return;
  const std::string message = std::string("emulated CUDA: ") + what + " failed with status " + std::to_string(status);
  if (status == mock::kMemoryAllocation) throw Error(ErrorCode::OutOfRange, message);
  cuda_mark_unusable(message);
  throw Error(ErrorCode::Internal, message);
}

Stream::Stream() {
  const SignalBlock no_signals;  // as device_memory.cu
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, nullptr, &now);
  const bool open = !sigismember(&now, SIGINT) || !sigismember(&now, SIGTERM) || !sigismember(&now, SIGALRM);
  mock::count([&](mock::Counters& c) {
    ++c.streams_created;
    c.signals_unblocked_at_stream_creation += open;
  });
  check_status(mock::next_status(mock::Op::StreamCreate), "cudaStreamCreate");
  handle_ = this;
}
Stream::~Stream() = default;
void Stream::synchronize() const {
  mock::count([](mock::Counters& c) { ++c.synchronizations; });
  check_status(mock::next_status(mock::Op::Synchronize), "cudaStreamSynchronize");
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  if (const int status = mock::next_status(mock::Op::DeviceAlloc)) {
    bytes_ = 0;
    check_status(status, ("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str());
  }
  data_ = std::aligned_alloc(256, (bytes + 255) / 256 * 256);  // cudaMalloc's alignment
  std::memset(data_, 0xff, bytes);
  mock::count([&](mock::Counters& c) {
    ++c.device_allocations;
    c.live_device_bytes += int64_t(bytes);
  });
}
DeviceBuffer::~DeviceBuffer() {
  if (data_) mock::count([&](mock::Counters& c) { c.live_device_bytes -= int64_t(bytes_); });
  std::free(data_);
}
DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) mock::count([&](mock::Counters& c) { c.live_device_bytes -= int64_t(bytes_); });
    std::free(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() { std::free(data_); }
void PinnedBuffer::fit(size_t bytes) {
  if (bytes <= bytes_) return;
  std::free(data_);
  data_ = nullptr;
  bytes_ = 0;
  check_status(mock::next_status(mock::Op::PinnedAlloc), ("cudaMallocHost of " + std::to_string(bytes) + " bytes").c_str());
  data_ = std::malloc(bytes);
  std::memset(data_, 0xff, bytes);
  bytes_ = bytes;
  mock::count([&](mock::Counters& c) {
    ++c.pinned_allocations;
    c.largest_pinned_bytes = std::max(c.largest_pinned_bytes, int64_t(bytes));
  });
}

void copy_to_device(void* dst, const void* src, size_t bytes, const Stream&) {
  if (!bytes) return;
  check_status(mock::next_status(mock::Op::CopyToDevice), "cudaMemcpyAsync (to device)");
  std::memcpy(dst, src, bytes);
  mock::count([&](mock::Counters& c) { c.h2d_bytes += int64_t(bytes); });
}
void copy_to_host(void* dst, const void* src, size_t bytes, const Stream&) {
  if (!bytes) return;
  check_status(mock::next_status(mock::Op::CopyToHost), "cudaMemcpyAsync (to host)");
  std::memcpy(dst, src, bytes);
  mock::count([&](mock::Counters& c) { c.d2h_bytes += int64_t(bytes); });
}
void copy_on_device(void* dst, const void* src, size_t bytes, const Stream&) { if (bytes) std::memcpy(dst, src, bytes); }
std::string device_description() { return "SIMT emulator (CPU)"; }

namespace detail {
bool probe_device(std::string* why) {
  *why = "SIMT emulator (CPU), not a GPU";
  return true;
}
}  // namespace detail

}  // namespace kvg::cuda
