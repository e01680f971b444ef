// kernels/cuda/device_memory.hpp and the device probe for the SIMT
// emulator: the emulated kernels run on the CPU, so device memory is host
// memory. New allocations are filled with 0xff bytes (NaN floats), so a
// kernel or the forward pass reading device memory nobody wrote shows up as
// NaN logits instead of passing by luck.
//
// It also counts transfers and allocations and injects failures on request
// (include/mock_control.hpp), classifying them as device_memory.cu does.
//
// Copies are modelled as CUDA defines them, not as memcpy: a copy to pinned
// host memory completes at the stream's next synchronize() (until then the
// destination holds 0xff bytes), a pinned source must stay unchanged until
// then, pinned memory may not be freed under a copy in flight, and device
// pointers must lie inside device allocations. Copies to or from pageable
// memory complete before the call returns, as the CUDA documentation says.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <map>
#include <mutex>
#include <vector>
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
// Every live allocation, by start address: device memory and pinned memory.
std::map<uintptr_t, size_t> device_ranges, pinned_ranges;

bool inside(const std::map<uintptr_t, size_t>& ranges, const void* p, size_t bytes) {
  const auto a = uintptr_t(p);
  auto it = ranges.upper_bound(a);
  if (it == ranges.begin()) return false;
  --it;
  return a >= it->first && a + bytes <= it->first + it->second;
}

// What a stream still owes its host side until synchronize().
struct InFlight {
  struct ToHost {  // a copy into pinned memory: lands at synchronize()
    void* dst;
    std::vector<unsigned char> bytes;
  };
  struct FromHost {  // a copy out of pinned memory: the source must not change
    const void* src;
    size_t bytes;
    uint64_t hash;
  };
  std::vector<ToHost> to_host;
  std::vector<FromHost> from_host;
};
std::map<const void*, InFlight> in_flight;  // by Stream

uint64_t fnv1a(const void* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ull;
  return h;
}

// Misuse of the runtime that hardware would turn into wrong data or a
// fault some time later: stop here, naming it.
[[noreturn]] void misuse(const std::string& what) {
  std::fprintf(stderr, "emulated CUDA: %s\n", what.c_str());
  std::abort();
}

bool overlaps(const void* a, size_t an, const void* b, size_t bn) {
  return uintptr_t(a) < uintptr_t(b) + bn && uintptr_t(b) < uintptr_t(a) + an;
}
}  // namespace

bool is_pinned(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex);
  return inside(pinned_ranges, p, bytes);
}
bool is_device(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex);
  return inside(device_ranges, p, bytes);
}

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
// cudaStreamDestroy does not wait: copies still owed to the host are lost
// here (on hardware they would land later, into memory the caller may have
// reused).
Stream::~Stream() {
  std::lock_guard<std::mutex> lock(mock::mutex);
  mock::in_flight.erase(this);
}
void Stream::synchronize() const {
  mock::count([](mock::Counters& c) { ++c.synchronizations; });
  {
    std::lock_guard<std::mutex> lock(mock::mutex);
    auto it = mock::in_flight.find(this);
    if (it != mock::in_flight.end()) {
      for (const auto& f : it->second.from_host)
        if (mock::fnv1a(f.src, f.bytes) != f.hash)
          mock::misuse("pinned memory at " + std::to_string(uintptr_t(f.src)) +
                       " changed while an asynchronous copy from it was in flight (write it only after synchronize)");
      for (const auto& t : it->second.to_host) std::memcpy(t.dst, t.bytes.data(), t.bytes.size());
      mock::in_flight.erase(it);
    }
  }
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
    mock::device_ranges[uintptr_t(data_)] = bytes;
  });
}
namespace {
void free_device(void* data, size_t bytes) {
  if (!data) return;
  mock::count([&](mock::Counters& c) {
    c.live_device_bytes -= int64_t(bytes);
    mock::device_ranges.erase(uintptr_t(data));
  });
  std::free(data);
}
}  // namespace
DeviceBuffer::~DeviceBuffer() { free_device(data_, bytes_); }
DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    free_device(data_, bytes_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

namespace {
// cudaFreeHost under a copy in flight: the DMA engine would read or write
// memory that is no longer the caller's.
void free_pinned(void* data, size_t bytes) {
  if (!data) return;
  {
    std::lock_guard<std::mutex> lock(mock::mutex);
    for (const auto& [stream, f] : mock::in_flight) {
      for (const auto& t : f.to_host)
        if (mock::overlaps(t.dst, t.bytes.size(), data, bytes))
          mock::misuse("pinned memory freed while an asynchronous copy into it was in flight");
      for (const auto& h : f.from_host)
        if (mock::overlaps(h.src, h.bytes, data, bytes))
          mock::misuse("pinned memory freed while an asynchronous copy from it was in flight");
    }
    mock::pinned_ranges.erase(uintptr_t(data));
    mock::totals.live_pinned_bytes -= int64_t(bytes);
  }
  std::free(data);
}
}  // namespace

PinnedBuffer::~PinnedBuffer() { free_pinned(data_, bytes_); }
void PinnedBuffer::fit(size_t bytes) {
  if (bytes <= bytes_) return;
  free_pinned(data_, bytes_);
  data_ = nullptr;
  bytes_ = 0;
  check_status(mock::next_status(mock::Op::PinnedAlloc), ("cudaMallocHost of " + std::to_string(bytes) + " bytes").c_str());
  data_ = std::malloc(bytes);
  std::memset(data_, 0xff, bytes);
  bytes_ = bytes;
  mock::count([&](mock::Counters& c) {
    ++c.pinned_allocations;
    c.largest_pinned_bytes = std::max(c.largest_pinned_bytes, int64_t(bytes));
    c.live_pinned_bytes += int64_t(bytes);
    mock::pinned_ranges[uintptr_t(data_)] = bytes;
  });
}

namespace {
void require_device(const void* p, size_t bytes, const char* what) {
  if (!mock::is_device(p, bytes))
    mock::misuse(std::string(what) + ": " + std::to_string(bytes) + " bytes at " + std::to_string(uintptr_t(p)) +
                 " are not inside one device allocation");
}
void require_host(const void* p, size_t bytes, const char* what) {
  if (mock::is_device(p, 1) || mock::is_device(static_cast<const char*>(p) + bytes - 1, 1))
    mock::misuse(std::string(what) + ": the host side is device memory");
}
}  // namespace

void copy_to_device(void* dst, const void* src, size_t bytes, const Stream& stream) {
  if (!bytes) return;
  require_device(dst, bytes, "cudaMemcpyAsync (to device)");
  require_host(src, bytes, "cudaMemcpyAsync (to device)");
  check_status(mock::next_status(mock::Op::CopyToDevice), "cudaMemcpyAsync (to device)");
  // Kernels later on the stream see the data, so it moves now; a pinned
  // source is read by the copy engine until the stream is synchronised.
  std::memcpy(dst, src, bytes);
  const bool pinned = mock::is_pinned(src, bytes);
  mock::count([&](mock::Counters& c) {
    c.h2d_bytes += int64_t(bytes);
    if (pinned) mock::in_flight[&stream].from_host.push_back({src, bytes, mock::fnv1a(src, bytes)});
  });
}
void copy_to_host(void* dst, const void* src, size_t bytes, const Stream& stream) {
  if (!bytes) return;
  require_device(src, bytes, "cudaMemcpyAsync (to host)");
  require_host(dst, bytes, "cudaMemcpyAsync (to host)");
  check_status(mock::next_status(mock::Op::CopyToHost), "cudaMemcpyAsync (to host)");
  if (!mock::is_pinned(dst, bytes)) {  // pageable: complete when the call returns
    std::memcpy(dst, src, bytes);
    mock::count([&](mock::Counters& c) { c.d2h_bytes += int64_t(bytes); });
    return;
  }
  // The bytes as they are now, in stream order; the host sees them only
  // after synchronize(), and poison until then.
  std::vector<unsigned char> data(static_cast<const unsigned char*>(src), static_cast<const unsigned char*>(src) + bytes);
  std::memset(dst, 0xff, bytes);
  mock::count([&](mock::Counters& c) {
    c.d2h_bytes += int64_t(bytes);
    ++c.deferred_copies_to_host;
    mock::in_flight[&stream].to_host.push_back({dst, std::move(data)});
  });
}
void copy_on_device(void* dst, const void* src, size_t bytes, const Stream&) {
  if (!bytes) return;
  require_device(dst, bytes, "cudaMemcpyAsync (device to device)");
  require_device(src, bytes, "cudaMemcpyAsync (device to device)");
  std::memmove(dst, src, bytes);
}
std::string device_description() { return "SIMT emulator (CPU)"; }

namespace detail {
bool probe_device(std::string* why) {
  *why = "SIMT emulator (CPU), not a GPU";
  return true;
}
}  // namespace detail

}  // namespace kvg::cuda
