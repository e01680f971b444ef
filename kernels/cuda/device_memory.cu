#include "kernels/cuda/device_memory.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <utility>

#include "common/error.hpp"
#include "kernels/cuda/cuda_runtime_probe.hpp"
#include "kernels/cuda/signal_block.hpp"

namespace kvg::cuda {

void check_status(int status, const char* what) {
  const cudaError_t e = static_cast<cudaError_t>(status);
  if (e == cudaSuccess) return;
  const std::string message = std::string("CUDA: ") + what + " failed: " + cudaGetErrorName(e) + " (" +
                              cudaGetErrorString(e) + ")";
  // Running out of memory leaves the context usable (the caller may fall back
  // to the CPU and try the GPU again later); any other error may be sticky and
  // poisons the context, so the process stops using the device.
  if (e == cudaErrorMemoryAllocation) throw Error(ErrorCode::OutOfRange, message);
  cuda_mark_unusable(message);
  throw Error(ErrorCode::Internal, message);
}

Stream::Stream() {
  cudaStream_t s = nullptr;
  const SignalBlock no_signals;  // the driver may start threads here (signal_block.hpp)
  // Non-blocking: no implicit synchronisation with the legacy default stream
  // that other code in the process might use.
  check_status(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  handle_ = s;
}

Stream::~Stream() {
  if (handle_) cudaStreamDestroy(static_cast<cudaStream_t>(handle_));  // errors at exit are moot
}

void Stream::synchronize() const {
  check_status(cudaStreamSynchronize(static_cast<cudaStream_t>(handle_)), "cudaStreamSynchronize");
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  const cudaError_t e = cudaMalloc(&data_, bytes);
  if (e != cudaSuccess) {
    data_ = nullptr;
    bytes_ = 0;
    cudaGetLastError();  // not sticky, but reset the last-error slot so later checks do not see it
    check_status(e, ("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str());
  }
}

DeviceBuffer::~DeviceBuffer() {
  if (data_) cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_) cudaFreeHost(data_);
}

void PinnedBuffer::fit(size_t bytes) {
  if (bytes <= bytes_) return;
  if (data_) cudaFreeHost(data_);
  data_ = nullptr;
  bytes_ = 0;
  const size_t want = std::max(bytes, size_t(1) << 20);
  const cudaError_t e = cudaMallocHost(&data_, want);
  if (e != cudaSuccess) {
    data_ = nullptr;
    cudaGetLastError();
    check_status(e, ("cudaMallocHost of " + std::to_string(want) + " bytes").c_str());
  }
  bytes_ = want;
}

void copy_to_device(void* device_dst, const void* host_src, size_t bytes, const Stream& stream) {
  if (bytes == 0) return;
  check_status(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice,
                               static_cast<cudaStream_t>(stream.handle())),
               "cudaMemcpyAsync (to device)");
}

void copy_to_host(void* host_dst, const void* device_src, size_t bytes, const Stream& stream) {
  if (bytes == 0) return;
  check_status(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost,
                               static_cast<cudaStream_t>(stream.handle())),
               "cudaMemcpyAsync (to host)");
}

void copy_on_device(void* device_dst, const void* device_src, size_t bytes, const Stream& stream) {
  if (bytes == 0) return;
  check_status(cudaMemcpyAsync(device_dst, device_src, bytes, cudaMemcpyDeviceToDevice,
                               static_cast<cudaStream_t>(stream.handle())),
               "cudaMemcpyAsync (on device)");
}

bool blocking_sync() {
  unsigned int flags = 0;
  check_status(cudaGetDeviceFlags(&flags), "cudaGetDeviceFlags");
  return (flags & cudaDeviceScheduleMask) == cudaDeviceScheduleBlockingSync;
}

std::string device_description() {
  int device = 0;
  check_status(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp prop{};
  check_status(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
         std::to_string(prop.totalGlobalMem >> 20) + " MiB)";
}

}  // namespace kvg::cuda
