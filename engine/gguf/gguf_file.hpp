// Read-only view of a GGUF file (v2 and v3), memory-mapped.
//
// Everything a count, offset or size in the file claims is validated against
// the mapping before it is used: a malformed file yields kvg::Error
// (ErrorCode::Corrupt or Unsupported) naming the key or tensor at fault, never
// an out-of-bounds read or an allocation sized by an untrusted count.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"

namespace kvg::gguf {

class MappingGuard;

// GGUF metadata value types, numbered as in the file format.
enum class ValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
const char* value_type_name(ValueType t);

// GGUF tensor types, numbered as in the file format (ggml_type).
enum class TensorType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, BF16 = 30,
};
const char* tensor_type_name(TensorType t);
// Elements per block and bytes per block; nullopt for a type we cannot size.
struct BlockShape { uint32_t elements; uint32_t bytes; };
std::optional<BlockShape> block_shape(TensorType t);
// Bytes of one scalar metadata value; nullopt for STRING, ARRAY and unknown numbers.
std::optional<uint32_t> scalar_size(ValueType t);
// Alignment of the tensor data when general.alignment is absent.
inline constexpr uint64_t kDefaultAlignment = 32;

// One metadata value. Scalars are decoded; strings and arrays point into the
// mapping (valid as long as the File lives).
struct Value {
  ValueType type = ValueType::U8;
  // scalar payloads (the one matching `type` is meaningful)
  uint64_t u = 0;      // U8/U16/U32/U64/BOOL
  int64_t i = 0;       // I8/I16/I32/I64
  double f = 0;        // F32/F64
  std::string_view s;  // STRING
  // ARRAY: element type and count; elements are read with the accessors below
  ValueType array_type = ValueType::U8;
  uint64_t array_count = 0;
  const uint8_t* array_data = nullptr;  // first element in the mapping
  // For arrays of strings, the views are decoded once at load.
  std::vector<std::string_view> strings;
};

struct KeyValue {
  std::string key;
  Value value;
};

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> ne;   // ne[0] is the innermost (contiguous) dimension
  TensorType type = TensorType::F32;
  uint64_t offset = 0;        // relative to the start of the tensor data section
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // inside the mapping, validated in bounds
};

class File {
 public:
  // Maps and validates the whole file. Throws kvg::Error.
  static std::shared_ptr<const File> open(const std::string& path);

  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::string& path() const { return path_; }
  std::span<const uint8_t> bytes() const { return {base_, size_}; }
  uint64_t data_offset() const { return data_offset_; }

  // False once the file was truncated under the mapping (the pages past its
  // new end now read as zeros, engine/gguf/mapping_guard.hpp): everything read
  // from it since may be wrong. check_intact() throws an Io error naming the
  // file; the engine calls it at safe points of every computation.
  bool intact() const;
  void check_intact() const;

  const std::vector<KeyValue>& metadata() const { return kv_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

  const Value* find(std::string_view key) const;
  const TensorInfo* find_tensor(std::string_view name) const;

  // Typed getters. `get_*` throw a Corrupt error naming the key if it is absent
  // or of an incompatible type; `opt_*` return nullopt if absent (and still
  // throw if present with a wrong type). Integer getters accept any integer
  // type whose value fits.
  std::string get_string(std::string_view key) const;
  std::optional<std::string> opt_string(std::string_view key) const;
  uint64_t get_uint(std::string_view key) const;
  std::optional<uint64_t> opt_uint(std::string_view key) const;
  double get_float(std::string_view key) const;
  std::optional<double> opt_float(std::string_view key) const;
  std::optional<bool> opt_bool(std::string_view key) const;
  // Arrays: throw if absent or the element type differs.
  std::vector<std::string_view> get_string_array(std::string_view key) const;
  std::vector<float> get_f32_array(std::string_view key) const;
  std::vector<int32_t> get_i32_array(std::string_view key) const;  // accepts I32 or U32 (if it fits)

 private:
  File() = default;
  void parse();  // validates the mapping and fills the index below
  std::string path_;
  const uint8_t* base_ = nullptr;
  std::unique_ptr<MappingGuard> guard_;  // registered before parse(), gone before munmap
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<KeyValue> kv_;
  std::vector<TensorInfo> tensors_;
};

}  // namespace kvg::gguf
