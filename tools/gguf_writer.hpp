// Builds GGUF v3 (or v2) files: metadata of every value type, then tensors
// padded to the alignment. Used by the synthetic model generator and by tests.
//
// The writer checks what it needs to produce well-formed bytes (known tensor
// types, data sizes that match the shape) but deliberately not what the
// reader rejects semantically (duplicate keys or tensor names), so tests can
// build hostile files with it. `Layout` reports the file offset of every
// field, so a test can corrupt exactly one of them afterwards.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/gguf/gguf_file.hpp"

namespace kvg::gguf {

namespace detail { class WriterOutput; }  // where emitted bytes go: a file or memory

// Absolute file offsets of one metadata pair's fields.
struct KeyLayout {
  std::string key;
  uint64_t key_at = 0;    // the u64 key length
  uint64_t type_at = 0;   // the u32 value type
  uint64_t value_at = 0;  // the value (for arrays: the u32 element type, then the u64 count)
  uint64_t end = 0;       // one past the value
};

// Absolute file offsets of one tensor info's fields and of its data.
struct TensorLayout {
  std::string name;
  uint64_t name_at = 0;    // the u64 name length
  uint64_t n_dims_at = 0;  // u32
  uint64_t ne_at = 0;      // n_dims u64 values
  uint64_t type_at = 0;    // u32
  uint64_t offset_at = 0;  // u64, relative to the data section
  uint64_t data_at = 0;    // absolute offset of the data
  uint64_t n_bytes = 0;
};

struct Layout {
  static constexpr uint64_t kMagicAt = 0, kVersionAt = 4, kTensorCountAt = 8, kKvCountAt = 16;
  std::vector<KeyLayout> keys;
  std::vector<TensorLayout> tensors;
  uint64_t header_end = 0;   // one past the last tensor info
  uint64_t data_offset = 0;  // header_end rounded up to the alignment
  uint64_t file_size = 0;

  // The first entry with this key/name; throws InvalidArgument when absent.
  const KeyLayout& key(std::string_view key) const;
  const TensorLayout& tensor(std::string_view name) const;
};

// Receives a tensor's bytes in order, in pieces of any size.
class TensorSink {
 public:
  virtual void write(const void* data, size_t n) = 0;
 protected:
  ~TensorSink() = default;
};
// Writes exactly the tensor's byte size to the sink. Called once per write()
// or serialize(), so the data never has to exist in memory as a whole.
using TensorProducer = std::function<void(TensorSink&)>;

class Writer {
 public:
  Writer() = default;

  // 3 by default; 2 has the same layout and exists for tests.
  void set_version(uint32_t version);
  // Power of two; also adds (or updates) the general.alignment (u32) key.
  // Default 32, without the key, as llama.cpp writes it.
  void set_alignment(uint32_t alignment);
  uint64_t alignment() const { return alignment_; }

  void add_u8(std::string_view key, uint8_t v);
  void add_i8(std::string_view key, int8_t v);
  void add_u16(std::string_view key, uint16_t v);
  void add_i16(std::string_view key, int16_t v);
  void add_u32(std::string_view key, uint32_t v);
  void add_i32(std::string_view key, int32_t v);
  void add_u64(std::string_view key, uint64_t v);
  void add_i64(std::string_view key, int64_t v);
  void add_f32(std::string_view key, float v);
  void add_f64(std::string_view key, double v);
  void add_bool(std::string_view key, bool v);
  void add_string(std::string_view key, std::string_view v);

  void add_array(std::string_view key, std::span<const uint8_t> v);
  void add_array(std::string_view key, std::span<const int8_t> v);
  void add_array(std::string_view key, std::span<const uint16_t> v);
  void add_array(std::string_view key, std::span<const int16_t> v);
  void add_array(std::string_view key, std::span<const uint32_t> v);
  void add_array(std::string_view key, std::span<const int32_t> v);
  void add_array(std::string_view key, std::span<const uint64_t> v);
  void add_array(std::string_view key, std::span<const int64_t> v);
  void add_array(std::string_view key, std::span<const float> v);
  void add_array(std::string_view key, std::span<const double> v);
  void add_array(std::string_view key, std::span<const bool> v);
  void add_array(std::string_view key, std::span<const std::string> v);
  void add_array(std::string_view key, std::span<const std::string_view> v);

  // A pair written verbatim: the key, then `type` (any number), then
  // `payload`. For tests that need values no typed call can express.
  void add_raw(std::string_view key, uint32_t type, std::vector<uint8_t> payload);

  // Tensors are laid out in the order added, each at the next aligned offset.
  // Throws InvalidArgument for an unknown type, a bad shape, or data whose
  // size is not the shape's byte size.
  void add_tensor(std::string_view name, std::vector<uint64_t> ne, TensorType type, std::vector<uint8_t> data);
  void add_tensor(std::string_view name, std::vector<uint64_t> ne, TensorType type, TensorProducer produce);

  // Byte size of a tensor of this shape and type (InvalidArgument if it has none).
  static uint64_t tensor_bytes(std::span<const uint64_t> ne, TensorType type);

  // Writes the file (through a temporary name, renamed when complete).
  Layout write(const std::string& path) const;
  // The whole file in memory, for small test files.
  std::vector<uint8_t> serialize(Layout* layout = nullptr) const;

 private:
  struct Pending {
    std::string name;
    std::vector<uint64_t> ne;
    TensorType type;
    uint64_t n_bytes;
    TensorProducer produce;
  };
  void add_scalar(std::string_view key, ValueType type, const void* v, size_t n);
  void add_array_bytes(std::string_view key, ValueType elem, const void* data, uint64_t count, size_t elem_size);
  Layout emit(detail::WriterOutput& out) const;

  uint32_t version_ = 3;
  uint64_t alignment_ = kDefaultAlignment;
  // Each pair's key, type and payload, already encoded.
  struct EncodedKv {
    std::string key;
    uint32_t type;
    std::vector<uint8_t> payload;
  };
  std::vector<EncodedKv> kv_;
  std::vector<Pending> tensors_;
};

}  // namespace kvg::gguf
