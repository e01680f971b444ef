#include "engine/zeroed_floats.hpp"

#include <sys/mman.h>  // mremap: _GNU_SOURCE, which g++ defines

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace kvg {

namespace {

// Below this a mapping's page-granular size and system call are not worth it.
constexpr size_t kMapFromBytes = size_t(1) << 20;

}  // namespace

ZeroedFloats::~ZeroedFloats() { release(); }

ZeroedFloats::ZeroedFloats(ZeroedFloats&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_bytes_(std::exchange(other.mapped_bytes_, 0)) {}

ZeroedFloats::ZeroedFloats(const ZeroedFloats& other) {
  grow(other.size_);
  if (size_) std::memcpy(data_, other.data_, size_ * sizeof(float));
}

ZeroedFloats& ZeroedFloats::operator=(const ZeroedFloats& other) {
  if (this != &other) *this = ZeroedFloats(other);
  return *this;
}

ZeroedFloats& ZeroedFloats::operator=(ZeroedFloats&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
  }
  return *this;
}

void ZeroedFloats::release() noexcept {
  if (!data_) return;
  if (mapped_bytes_)
    munmap(data_, mapped_bytes_);
  else
    std::free(data_);
  data_ = nullptr;
  size_ = mapped_bytes_ = 0;
}

void ZeroedFloats::grow(size_t n) {
  if (n <= size_) return;
  if (n > SIZE_MAX / sizeof(float)) throw std::bad_alloc();
  const size_t bytes = n * sizeof(float);
  if (mapped_bytes_) {  // the kernel moves the pages: nothing is copied
    void* p = mremap(data_, mapped_bytes_, bytes, MREMAP_MAYMOVE);
    if (p == MAP_FAILED) throw std::bad_alloc();
    madvise(p, bytes, MADV_HUGEPAGE);
    data_ = static_cast<float*>(p);
    size_ = n;
    mapped_bytes_ = bytes;
    return;
  }
  float* fresh = nullptr;
  size_t mapped = 0;
  if (bytes >= kMapFromBytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    madvise(p, bytes, MADV_HUGEPAGE);  // advice only: without it, 4 KiB pages
    fresh = static_cast<float*>(p);
    mapped = bytes;
  } else {
    fresh = static_cast<float*>(std::calloc(n, sizeof(float)));
    if (!fresh) throw std::bad_alloc();
  }
  if (size_) std::memcpy(fresh, data_, size_ * sizeof(float));
  release();
  data_ = fresh;
  size_ = n;
  mapped_bytes_ = mapped;
}

}  // namespace kvg
