// kernels/cuda/device_memory.hpp and the device probe for the SIMT
// emulator: the emulated kernels run on the CPU, so device memory is host
// memory. New allocations are filled with 0xff bytes (NaN floats), so a
// kernel or the forward pass reading device memory nobody wrote shows up as
// NaN logits instead of passing by luck.
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "common/error.hpp"
#include "kernels/cuda/device_memory.hpp"

namespace kvg::cuda {

void check_status(int status, const char* what) {
  if (status != 0) throw Error(ErrorCode::Internal, std::string("emulated CUDA: ") + what);
}

Stream::Stream() { handle_ = this; }
Stream::~Stream() = default;
void Stream::synchronize() const {}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  data_ = std::aligned_alloc(256, (bytes + 255) / 256 * 256);  // cudaMalloc's alignment
  std::memset(data_, 0xff, bytes);
}
DeviceBuffer::~DeviceBuffer() { std::free(data_); }
DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
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
  data_ = std::malloc(bytes);
  std::memset(data_, 0xff, bytes);
  bytes_ = bytes;
}

void copy_to_device(void* dst, const void* src, size_t bytes, const Stream&) { if (bytes) std::memcpy(dst, src, bytes); }
void copy_to_host(void* dst, const void* src, size_t bytes, const Stream&) { if (bytes) std::memcpy(dst, src, bytes); }
void copy_on_device(void* dst, const void* src, size_t bytes, const Stream&) { if (bytes) std::memcpy(dst, src, bytes); }
std::string device_description() { return "SIMT emulator (CPU)"; }

namespace detail {
bool probe_device(std::string* why) {
  *why = "SIMT emulator (CPU), not a GPU";
  return true;
}
}  // namespace detail

}  // namespace kvg::cuda
