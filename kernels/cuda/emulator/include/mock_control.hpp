// What the emulator's stand-in for the CUDA runtime (../mock_runtime.cpp)
// counts, and the failures it can inject, so tests can check how the engine
// moves data and how it survives CUDA errors without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvg::cuda::mock {

// Real cudaError_t values, so check_status() classifies them as it does on a GPU.
inline constexpr int kMemoryAllocation = 2;   // cudaErrorMemoryAllocation: not sticky
inline constexpr int kIllegalAddress = 700;   // cudaErrorIllegalAddress: a kernel fault, sticky

struct Counters {
  int64_t h2d_bytes = 0;          // copy_to_device
  int64_t d2h_bytes = 0;          // copy_to_host
  int64_t device_allocations = 0; // DeviceBuffer of > 0 bytes
  int64_t live_device_bytes = 0;  // allocated and not yet freed
  int64_t pinned_allocations = 0; // PinnedBuffer growths
  int64_t largest_pinned_bytes = 0;  // the largest PinnedBuffer since reset_largest_pinned()
  int64_t live_pinned_bytes = 0;     // pinned memory allocated and not yet freed
  int64_t deferred_copies_to_host = 0;  // copies into pinned memory, landing at synchronize()
  int64_t streams_created = 0;
  int64_t synchronizations = 0;
  int64_t signals_unblocked_at_stream_creation = 0;  // SIGINT/SIGTERM/SIGALRM open when a stream was made
};
Counters counters();
void reset_largest_pinned();

// Whether [p, p + bytes) lies inside one live PinnedBuffer / DeviceBuffer:
// pinned memory is not malloc memory to the emulated runtime.
bool is_pinned(const void* p, size_t bytes);
bool is_device(const void* p, size_t bytes);

// The operations a failure can be injected into.
enum class Op { DeviceAlloc, PinnedAlloc, StreamCreate, CopyToDevice, CopyToHost, Synchronize };

// The (skip + 1)-th next call of `op` fails with `status` (one of the values
// above). One pending failure per Op; clear_failures() drops them all.
void fail(Op op, int status, int skip = 0);
void clear_failures();

}  // namespace kvg::cuda::mock
