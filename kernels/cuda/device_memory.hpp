// Device memory, pinned host memory and a stream, as plain C++ (no CUDA types
// in this header), so engine code compiled by the host compiler can own them.
//
// Device memory is plain cudaMalloc, never managed memory: the engine decides
// every transfer. Every failure throws kvg::Error naming the CUDA error.
#pragma once

#include <cstddef>
#include <string>

namespace kvg::cuda {

// Throws kvg::Error (Internal; OutOfRange for an allocation failure) when
// `status` (a cudaError_t) is not success. `what` names the operation.
void check_status(int status, const char* what);

// One CUDA stream; kernels and copies issued on it run in order.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  void* handle() const { return handle_; }  // a cudaStream_t
  // Waits for everything issued so far; throws if any of it failed.
  void synchronize() const;

 private:
  void* handle_ = nullptr;
};

// A device allocation, released on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  size_t bytes() const { return bytes_; }
  void* data() const { return data_; }
  template <class T>
  T* as() const { return static_cast<T*>(data_); }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Page-locked host memory: the staging area for copies that overlap nothing
// else but must not be split into pageable chunks by the driver.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  // Makes at least `bytes` available (contents are not kept).
  void fit(size_t bytes);
  void* data() const { return data_; }
  template <class T>
  T* as() const { return static_cast<T*>(data_); }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Asynchronous copies on `stream` (host memory may be pageable; then the
// call returns only when the source has been read).
void copy_to_device(void* device_dst, const void* host_src, size_t bytes, const Stream& stream);
void copy_to_host(void* host_dst, const void* device_src, size_t bytes, const Stream& stream);
void copy_on_device(void* device_dst, const void* device_src, size_t bytes, const Stream& stream);

// Whether a thread waiting for the device sleeps (cudaDeviceScheduleBlockingSync,
// which the probe requests before the context exists) instead of spinning a
// core. A real-GPU check only: the emulator has no scheduling to ask about.
bool blocking_sync();

// Name and compute capability of the current device, e.g. "NVIDIA H200 (sm_90)".
std::string device_description();

}  // namespace kvg::cuda
