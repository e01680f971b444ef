// A growable float buffer whose fresh part is zero without a memset pass:
// large buffers are anonymous mappings, which the kernel zeroes as their
// pages are first touched (in huge pages where it can). The KV cache holds
// its rows in these: a long graft reserves its whole prefix at once, and
// zero-filling ~160 MB before copying the artifact over it cost as much as
// the copy (issue 11: 48 ms of a 2,000-token graft on a 1.1B model).
#pragma once

#include <cstddef>

namespace kvg {

class ZeroedFloats {
 public:
  ZeroedFloats() = default;
  ~ZeroedFloats();
  ZeroedFloats(ZeroedFloats&& other) noexcept;
  ZeroedFloats& operator=(ZeroedFloats&& other) noexcept;
  ZeroedFloats(const ZeroedFloats& other);  // a deep copy
  ZeroedFloats& operator=(const ZeroedFloats& other);

  // Grows to `n` floats: [0, size()) keeps its values, the rest reads 0.
  // Never shrinks. Throws std::bad_alloc when the memory is not there.
  void grow(size_t n);

  float* data() { return data_; }
  const float* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void release() noexcept;

  float* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_bytes_ = 0;  // 0: data_ came from calloc
};

}  // namespace kvg
