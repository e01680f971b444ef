// GGUF v2/v3 reader. The file is untrusted input (a model a user points the
// server at), so every number it contains is checked against the mapping
// before it sizes an allocation, a loop or a pointer. The parse runs once at
// open; afterwards the File is an immutable index into the mapping.
#include "engine/gguf/gguf_file.hpp"

#include "engine/gguf/mapping_guard.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <unordered_set>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kvg::gguf {

// The format is little-endian and we read it with memcpy.
static_assert(std::endian::native == std::endian::little, "GGUF reader assumes a little-endian host");

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::U8: return "u8";
    case ValueType::I8: return "i8";
    case ValueType::U16: return "u16";
    case ValueType::I16: return "i16";
    case ValueType::U32: return "u32";
    case ValueType::I32: return "i32";
    case ValueType::F32: return "f32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::U64: return "u64";
    case ValueType::I64: return "i64";
    case ValueType::F64: return "f64";
  }
  return "unknown";
}

const char* tensor_type_name(TensorType t) {
  switch (t) {
    case TensorType::F32: return "F32";
    case TensorType::F16: return "F16";
    case TensorType::Q4_0: return "Q4_0";
    case TensorType::Q4_1: return "Q4_1";
    case TensorType::Q5_0: return "Q5_0";
    case TensorType::Q5_1: return "Q5_1";
    case TensorType::Q8_0: return "Q8_0";
    case TensorType::Q8_1: return "Q8_1";
    case TensorType::Q2_K: return "Q2_K";
    case TensorType::Q3_K: return "Q3_K";
    case TensorType::Q4_K: return "Q4_K";
    case TensorType::Q5_K: return "Q5_K";
    case TensorType::Q6_K: return "Q6_K";
    case TensorType::Q8_K: return "Q8_K";
    case TensorType::BF16: return "BF16";
  }
  return "unknown";
}

std::optional<BlockShape> block_shape(TensorType t) {
  switch (t) {
    case TensorType::F32: return BlockShape{1, 4};
    case TensorType::F16: return BlockShape{1, 2};
    case TensorType::BF16: return BlockShape{1, 2};
    case TensorType::Q4_0: return BlockShape{32, 18};
    case TensorType::Q4_1: return BlockShape{32, 20};
    case TensorType::Q5_0: return BlockShape{32, 22};
    case TensorType::Q5_1: return BlockShape{32, 24};
    case TensorType::Q8_0: return BlockShape{32, 34};
    case TensorType::Q8_1: return BlockShape{32, 36};
    case TensorType::Q2_K: return BlockShape{256, 84};
    case TensorType::Q3_K: return BlockShape{256, 110};
    case TensorType::Q4_K: return BlockShape{256, 144};
    case TensorType::Q5_K: return BlockShape{256, 176};
    case TensorType::Q6_K: return BlockShape{256, 210};
    case TensorType::Q8_K: return BlockShape{256, 292};
  }
  return std::nullopt;
}

std::optional<uint32_t> scalar_size(ValueType t) {
  switch (t) {
    case ValueType::U8: case ValueType::I8: case ValueType::BOOL: return 1;
    case ValueType::U16: case ValueType::I16: return 2;
    case ValueType::U32: case ValueType::I32: case ValueType::F32: return 4;
    case ValueType::U64: case ValueType::I64: case ValueType::F64: return 8;
    case ValueType::STRING: case ValueType::ARRAY: return std::nullopt;
  }
  return std::nullopt;
}

namespace {

// Smallest encodings, used to reject counts the remaining bytes cannot hold
// before anything is reserved: a key/value pair is a key length (8), a type
// (4) and at least a one-byte value; a tensor info is a name length (8),
// n_dims (4), one ne (8), a type (4) and an offset (8).
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
constexpr uint32_t kMaxDims = 4;

// Limits that keep memory proportional to what a real model needs. The byte
// bounds above stop reads past the end, but an in-memory KeyValue, TensorInfo
// or string_view is larger than its smallest encoding, so a big hostile file
// could still claim gigabytes of index. Real files are far below these.
constexpr uint64_t kMaxKeyValues = 1 << 16;
constexpr uint64_t kMaxTensors = 1 << 20;
constexpr uint64_t kMaxArrayStrings = 1 << 24;  // vocabularies and merge lists
constexpr uint64_t kMaxKeyBytes = 65535;        // the GGUF spec's limits
constexpr uint64_t kMaxTensorNameBytes = 64;

[[noreturn]] void fail(ErrorCode code, const std::string& message) { throw Error(code, "GGUF: " + message); }

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

bool is_integer(ValueType t) {
  switch (t) {
    case ValueType::U8: case ValueType::I8: case ValueType::U16: case ValueType::I16:
    case ValueType::U32: case ValueType::I32: case ValueType::U64: case ValueType::I64: return true;
    default: return false;
  }
}

bool is_known_value_type(uint32_t t) { return t <= uint32_t(ValueType::F64); }

// Bounds-checked little-endian cursor over the mapping. `what` is a callable
// producing the description of the field being read, so the happy path never
// builds strings.
class Reader {
 public:
  Reader(const uint8_t* base, uint64_t size) : base_(base), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }
  const uint8_t* here() const { return base_ + pos_; }

  template <class What>
  void need(uint64_t n, const What& what) const {
    if (n > remaining())
      fail(ErrorCode::Corrupt, "truncated: " + what() + " at offset " + std::to_string(pos_) + " needs " +
                                   std::to_string(n) + " bytes but the file ends at " + std::to_string(size_));
  }

  template <class T, class What>
  T scalar(const What& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  template <class What>
  std::string_view string(const What& what) {
    const uint64_t n = scalar<uint64_t>([&] { return "length of " + what(); });
    if (n > remaining())
      fail(ErrorCode::Corrupt, what() + ": string length " + std::to_string(n) + " at offset " +
                                   std::to_string(pos_ - 8) + " runs past end of file (" +
                                   std::to_string(remaining()) + " bytes left)");
    std::string_view s(reinterpret_cast<const char*>(base_ + pos_), n);
    pos_ += n;
    return s;
  }

  void skip(uint64_t n) { pos_ += n; }  // caller has checked with need()

 private:
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

// Reads one scalar of type t into v. The reader has already checked the type.
template <class What>
void read_scalar(Reader& r, ValueType t, Value& v, const What& what) {
  switch (t) {
    case ValueType::U8: v.u = r.scalar<uint8_t>(what); break;
    case ValueType::I8: v.i = r.scalar<int8_t>(what); break;
    case ValueType::U16: v.u = r.scalar<uint16_t>(what); break;
    case ValueType::I16: v.i = r.scalar<int16_t>(what); break;
    case ValueType::U32: v.u = r.scalar<uint32_t>(what); break;
    case ValueType::I32: v.i = r.scalar<int32_t>(what); break;
    case ValueType::U64: v.u = r.scalar<uint64_t>(what); break;
    case ValueType::I64: v.i = r.scalar<int64_t>(what); break;
    case ValueType::F32: v.f = r.scalar<float>(what); break;
    case ValueType::F64: v.f = r.scalar<double>(what); break;
    case ValueType::BOOL: {
      const uint8_t b = r.scalar<uint8_t>(what);
      // Anything but 0/1 means the bytes are not what the writer meant.
      if (b > 1) fail(ErrorCode::Corrupt, what() + ": bool value " + std::to_string(b) + " is neither 0 nor 1");
      v.u = b;
      break;
    }
    case ValueType::STRING:
    case ValueType::ARRAY: break;  // not scalars
  }
}

void read_value(Reader& r, ValueType type, std::string_view key, Value& v) {
  auto what = [&] { return "value of key " + quoted(key); };
  v.type = type;
  if (type == ValueType::STRING) {
    v.s = r.string(what);
    return;
  }
  if (type != ValueType::ARRAY) {
    read_scalar(r, type, v, what);
    return;
  }
  const uint32_t elem = r.scalar<uint32_t>([&] { return "array element type of key " + quoted(key); });
  if (!is_known_value_type(elem))
    fail(ErrorCode::Corrupt, "key " + quoted(key) + ": array has unknown element type " + std::to_string(elem));
  if (ValueType(elem) == ValueType::ARRAY)
    fail(ErrorCode::Unsupported, "key " + quoted(key) + ": arrays of arrays are not supported");
  const uint64_t count = r.scalar<uint64_t>([&] { return "array count of key " + quoted(key); });
  v.array_type = ValueType(elem);
  v.array_count = count;
  v.array_data = r.here();
  if (v.array_type == ValueType::STRING) {
    // Each string costs at least its 8-byte length, which bounds the reserve.
    if (count > r.remaining() / 8)
      fail(ErrorCode::Corrupt, "key " + quoted(key) + ": array of " + std::to_string(count) +
                                   " strings cannot fit in the " + std::to_string(r.remaining()) +
                                   " bytes left in the file");
    if (count > kMaxArrayStrings)
      fail(ErrorCode::Unsupported, "key " + quoted(key) + ": array of " + std::to_string(count) +
                                       " strings exceeds the limit of " + std::to_string(kMaxArrayStrings));
    v.strings.reserve(count);
    for (uint64_t i = 0; i < count; ++i)
      v.strings.push_back(r.string([&] { return "element " + std::to_string(i) + " of key " + quoted(key); }));
    return;
  }
  const uint64_t size = *scalar_size(v.array_type);
  if (count > r.remaining() / size)
    fail(ErrorCode::Corrupt, "key " + quoted(key) + ": array of " + std::to_string(count) + " " +
                                 value_type_name(v.array_type) + " values (" + std::to_string(size) +
                                 " bytes each) runs past end of file (" + std::to_string(r.remaining()) +
                                 " bytes left)");
  if (v.array_type == ValueType::BOOL) {
    for (uint64_t i = 0; i < count; ++i)
      if (v.array_data[i] > 1)
        fail(ErrorCode::Corrupt, "key " + quoted(key) + ": bool element " + std::to_string(i) + " is " +
                                     std::to_string(v.array_data[i]) + ", neither 0 nor 1");
  }
  r.skip(count * size);
}

bool add_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_add_overflow(a, b, out); }
bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

std::string shape_string(const std::vector<uint64_t>& ne) {
  std::string s = "[";
  for (size_t d = 0; d < ne.size(); ++d) s += (d ? ", " : "") + std::to_string(ne[d]);
  return s + "]";
}

uint64_t read_alignment(const std::vector<KeyValue>& kv) {
  for (const KeyValue& p : kv) {
    if (p.key != "general.alignment") continue;
    const Value& v = p.value;
    uint64_t a;
    if (v.type == ValueType::U8 || v.type == ValueType::U16 || v.type == ValueType::U32 || v.type == ValueType::U64) {
      a = v.u;
    } else if (is_integer(v.type) && v.i > 0) {
      a = uint64_t(v.i);
    } else {
      fail(ErrorCode::Corrupt, std::string("key 'general.alignment' has type ") + value_type_name(v.type) +
                                   (is_integer(v.type) ? " and a non-positive value" : "") +
                                   ", expected a positive integer");
    }
    if (!std::has_single_bit(a))
      fail(ErrorCode::Corrupt, "key 'general.alignment' = " + std::to_string(a) + " is not a power of two");
    return a;
  }
  return kDefaultAlignment;
}

// The first four bytes must be "GGUF"; anything else is shown as printable
// characters or \x escapes, so a text file or a truncated download is
// recognisable in the message.
void check_magic(Reader& r) {
  r.need(4, [] { return std::string("magic"); });
  if (std::memcmp(r.here(), "GGUF", 4) != 0) {
    std::string shown;
    for (int i = 0; i < 4; ++i) {
      const uint8_t c = r.here()[i];
      if (c >= 0x20 && c < 0x7f) {
        shown += char(c);
      } else {
        static const char* hex = "0123456789abcdef";
        shown += std::string("\\x") + hex[c >> 4] + hex[c & 15];
      }
    }
    fail(ErrorCode::Corrupt, "bad magic '" + shown + "' (expected 'GGUF'): not a GGUF file");
  }
  r.skip(4);
}

// Versions 2 and 3 only; a byte-swapped 2 or 3 is a big-endian file, said so.
uint32_t read_version(Reader& r) {
  const uint32_t version = r.scalar<uint32_t>([] { return std::string("version"); });
  if (version == 1) fail(ErrorCode::Unsupported, "version 1 is not supported (only versions 2 and 3 are)");
  if (version != 2 && version != 3) {
    const uint32_t swapped = __builtin_bswap32(version);
    if (swapped == 2 || swapped == 3) fail(ErrorCode::Unsupported, "big-endian GGUF files are not supported");
    fail(ErrorCode::Unsupported, "unknown version " + std::to_string(version) + " (only versions 2 and 3 are supported)");
  }
  return version;
}

// The header's two counts, checked against the bytes that follow (Corrupt)
// and then against the memory limits (Unsupported), before anything is reserved.
void check_header_counts(uint64_t n_tensors, uint64_t n_kv, uint64_t remaining) {
  if (n_kv > remaining / kMinKvBytes)
    fail(ErrorCode::Corrupt, "header claims " + std::to_string(n_kv) + " metadata pairs but only " +
                                 std::to_string(remaining) + " bytes follow (each pair needs at least " +
                                 std::to_string(kMinKvBytes) + ")");
  if (n_tensors > remaining / kMinTensorInfoBytes)
    fail(ErrorCode::Corrupt, "header claims " + std::to_string(n_tensors) + " tensors but only " +
                                 std::to_string(remaining) + " bytes follow (each tensor info needs at least " +
                                 std::to_string(kMinTensorInfoBytes) + ")");

  if (n_kv > kMaxKeyValues)
    fail(ErrorCode::Unsupported, "header claims " + std::to_string(n_kv) + " metadata pairs, more than the limit of " +
                                     std::to_string(kMaxKeyValues));
  if (n_tensors > kMaxTensors)
    fail(ErrorCode::Unsupported, "header claims " + std::to_string(n_tensors) + " tensors, more than the limit of " +
                                     std::to_string(kMaxTensors));
}

// The n_kv key/value pairs: non-empty, bounded, unique keys of known types.
void read_metadata(Reader& r, uint64_t n_kv, std::vector<KeyValue>& kv) {
  kv.reserve(n_kv);
  std::unordered_set<std::string_view> keys;
  for (uint64_t k = 0; k < n_kv; ++k) {
    const std::string_view key = r.string([&] { return "key of metadata pair " + std::to_string(k); });
    if (key.empty()) fail(ErrorCode::Corrupt, "metadata pair " + std::to_string(k) + " has an empty key");
    if (key.size() > kMaxKeyBytes)
      fail(ErrorCode::Corrupt, "metadata pair " + std::to_string(k) + " has a key of " + std::to_string(key.size()) +
                                   " bytes (at most " + std::to_string(kMaxKeyBytes) + ")");
    if (!keys.insert(key).second) fail(ErrorCode::Corrupt, "duplicate key " + quoted(key));
    const uint32_t type = r.scalar<uint32_t>([&] { return "value type of key " + quoted(key); });
    if (!is_known_value_type(type))
      fail(ErrorCode::Corrupt, "key " + quoted(key) + " has unknown value type " + std::to_string(type));
    KeyValue& p = kv.emplace_back();
    p.key = key;
    read_value(r, ValueType(type), key, p.value);
  }
}

// A tensor's n_dims and ne[]: 1..kMaxDims non-zero dimensions whose product
// (the returned element count) fits ggml's int64 indexing.
uint64_t read_shape(Reader& r, const std::string& tn, TensorInfo& info) {
  const uint32_t n_dims = r.scalar<uint32_t>([&] { return "n_dims of " + tn; });
  if (n_dims < 1 || n_dims > kMaxDims)
    fail(ErrorCode::Corrupt, tn + " has n_dims " + std::to_string(n_dims) + " (must be 1.." + std::to_string(kMaxDims) + ")");
  uint64_t n_elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const uint64_t ne = r.scalar<uint64_t>([&] { return "ne[" + std::to_string(d) + "] of " + tn; });
    if (ne == 0) fail(ErrorCode::Corrupt, tn + " has a zero dimension ne[" + std::to_string(d) + "]");
    info.ne.push_back(ne);
    // ggml indexes with int64, so the element count must fit in one.
    if (mul_overflows(n_elements, ne, &n_elements) || n_elements > uint64_t(std::numeric_limits<int64_t>::max()))
      fail(ErrorCode::Corrupt, tn + " shape " + shape_string(info.ne) + (d + 1 < n_dims ? "..." : "") +
                                   ": element count overflows int64");
  }
  return n_elements;
}

// A tensor's type, which must be known and whose block must divide ne[0];
// sets info.type and info.n_bytes.
void read_tensor_type(Reader& r, const std::string& tn, TensorInfo& info) {
  const uint32_t type = r.scalar<uint32_t>([&] { return "type of " + tn; });
  info.type = TensorType(type);
  const std::optional<BlockShape> block = block_shape(info.type);
  if (!block) fail(ErrorCode::Unsupported, tn + " has unknown tensor type " + std::to_string(type));
  if (info.ne[0] % block->elements != 0)
    fail(ErrorCode::Corrupt, tn + " (" + tensor_type_name(info.type) + ") has ne[0] = " + std::to_string(info.ne[0]) +
                                 ", not a multiple of the block size " + std::to_string(block->elements));
  // n_elements < 2^63 and bytes/elements <= 4, so this cannot overflow;
  // checked anyway so the invariant does not live in a comment.
  if (mul_overflows(info.n_elements / block->elements, block->bytes, &info.n_bytes))
    fail(ErrorCode::Corrupt, tn + " shape " + shape_string(info.ne) + ": byte size overflows");
}

// The n_tensors tensor infos: unique bounded names, shapes, types and
// aligned data offsets (relative to the data section, placed later).
void read_tensor_infos(Reader& r, uint64_t n_tensors, uint64_t alignment, std::vector<TensorInfo>& tensors) {
  // Now that the metadata is consumed, the tighter bound applies.
  if (n_tensors > r.remaining() / kMinTensorInfoBytes)
    fail(ErrorCode::Corrupt, "header claims " + std::to_string(n_tensors) + " tensors but only " +
                                 std::to_string(r.remaining()) + " bytes follow the metadata (each tensor info needs at least " +
                                 std::to_string(kMinTensorInfoBytes) + ")");
  tensors.reserve(n_tensors);
  std::unordered_set<std::string_view> names;
  for (uint64_t t = 0; t < n_tensors; ++t) {
    const std::string_view name = r.string([&] { return "name of tensor " + std::to_string(t); });
    if (name.empty()) fail(ErrorCode::Corrupt, "tensor " + std::to_string(t) + " has an empty name");
    if (name.size() > kMaxTensorNameBytes)
      fail(ErrorCode::Corrupt, "tensor " + std::to_string(t) + " has a name of " + std::to_string(name.size()) +
                                   " bytes (at most " + std::to_string(kMaxTensorNameBytes) + "): " +
                                   quoted(name.substr(0, kMaxTensorNameBytes)) + "...");
    if (!names.insert(name).second) fail(ErrorCode::Corrupt, "duplicate tensor name " + quoted(name));
    const std::string tn = "tensor " + quoted(name);
    TensorInfo& info = tensors.emplace_back();
    info.name = name;
    info.n_elements = read_shape(r, tn, info);
    read_tensor_type(r, tn, info);
    info.offset = r.scalar<uint64_t>([&] { return "data offset of " + tn; });
    if (info.offset % alignment != 0)
      fail(ErrorCode::Corrupt, tn + ": data offset " + std::to_string(info.offset) + " is not a multiple of the alignment " +
                                   std::to_string(alignment));
  }
}

// Points each tensor at its bytes in the mapping, after checking that they
// and their padding to the alignment lie within the file.
void place_tensors(std::vector<TensorInfo>& tensors, const uint8_t* base, uint64_t size, uint64_t data_offset,
                   uint64_t alignment) {
  for (TensorInfo& info : tensors) {
    const std::string extent = "tensor " + quoted(info.name) + ": data [offset " + std::to_string(info.offset) +
                               " in the data section at " + std::to_string(data_offset) + ", " +
                               std::to_string(info.n_bytes) + " bytes]";
    uint64_t begin, end;
    if (add_overflows(data_offset, info.offset, &begin) || add_overflows(begin, info.n_bytes, &end) || end > size)
      fail(ErrorCode::Corrupt, extent + " extends past end of file (size " + std::to_string(size) + ")");
    // Writers (llama.cpp, gguf-py) pad every tensor, the last one included,
    // and llama.cpp reads the padded size; a file cut inside that padding is
    // cut, not merely unpadded.
    const uint64_t padding = (alignment - info.n_bytes % alignment) % alignment;
    if (padding > size - end)
      fail(ErrorCode::Corrupt, extent + " and its padding to the alignment " + std::to_string(alignment) +
                                   " extend past end of file (size " + std::to_string(size) + ")");
    info.data = base + begin;
  }
}

// Overlapping tensors cannot come from a writer; they mean the offsets are
// corrupt (and would alias weights silently).
void check_no_overlap(const std::vector<TensorInfo>& tensors) {
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(tensors.size());
  for (const TensorInfo& info : tensors) by_offset.push_back(&info);
  std::stable_sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo* a = by_offset[i - 1];
    const TensorInfo* b = by_offset[i];
    if (a->offset + a->n_bytes > b->offset)
      fail(ErrorCode::Corrupt, "tensor " + quoted(b->name) + " at data offset " + std::to_string(b->offset) +
                                   " overlaps tensor " + quoted(a->name) + " [offset " + std::to_string(a->offset) +
                                   ", " + std::to_string(a->n_bytes) + " bytes]");
  }
}

}  // namespace

std::shared_ptr<const File> File::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    fail(e == ENOENT ? ErrorCode::NotFound : ErrorCode::Io, "cannot open " + quoted(path) + ": " + std::strerror(e));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    fail(ErrorCode::Io, "cannot stat " + quoted(path) + ": " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(ErrorCode::Io, quoted(path) + " is not a regular file");
  }
  std::unique_ptr<File> file(new File());
  file->path_ = path;
  file->size_ = uint64_t(st.st_size);
#ifdef KVG_GGUF_HEAP_COPY
  // Sanitizer builds only: an exact-size heap copy instead of a mapping, so
  // AddressSanitizer reports any read past the end (the zero-filled tail of a
  // mapping's last page would hide it).
  if (file->size_ > 0) {
    uint8_t* copy = static_cast<uint8_t*>(std::malloc(file->size_));
    if (!copy) {
      ::close(fd);
      fail(ErrorCode::Io, "cannot allocate a copy of " + quoted(path));
    }
    file->base_ = copy;
    for (uint64_t done = 0; done < file->size_;) {
      const ssize_t n = ::pread(fd, copy + done, file->size_ - done, off_t(done));
      if (n <= 0) {
        ::close(fd);
        fail(ErrorCode::Io, "cannot read " + quoted(path));
      }
      done += uint64_t(n);
    }
  }
#else
  if (file->size_ > 0) {
    // MAP_SHARED + read-only: every backend mapping the same model shares one
    // copy in the page cache.
    void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      fail(ErrorCode::Io, "cannot mmap " + quoted(path) + " (" + std::to_string(file->size_) + " bytes): " +
                              std::strerror(e));
    }
    file->base_ = static_cast<const uint8_t*>(p);
    file->guard_ = std::make_unique<MappingGuard>(p, file->size_);
  }
#endif
  ::close(fd);  // the mapping keeps the file referenced

  try {
    file->parse();
  } catch (const Error& e) {
    // Name the file too; the message already says what is wrong.
    // A file cut while we parsed it reads as zeros past the cut: say that,
    // not what the zeros look like.
    file->check_intact();
    throw Error(e.code(), std::string(e.what()) + " (file " + quoted(path) + ")");
  }
  file->check_intact();
  return std::shared_ptr<const File>(file.release());
}

File::~File() {
#ifdef KVG_GGUF_HEAP_COPY
  std::free(const_cast<uint8_t*>(base_));
#else
  guard_.reset();
  if (base_) ::munmap(const_cast<uint8_t*>(base_), size_);
#endif
}

bool File::intact() const { return !guard_ || !guard_->damaged(); }

void File::check_intact() const {
  if (intact()) return;
  throw Error(ErrorCode::Io, "model file " + quoted(path_) + " was truncated while in use (it was " +
                                 std::to_string(size_) + " bytes when loaded): what was read from it since is void, "
                                 "so this call fails; the next call loads the file again. Replace a model by "
                                 "renaming a new file over it (mv), never by rewriting it in place");
}

void File::parse() {
  Reader r(base_, size_);
  check_magic(r);
  version_ = read_version(r);
  const uint64_t n_tensors = r.scalar<uint64_t>([] { return std::string("tensor count"); });
  const uint64_t n_kv = r.scalar<uint64_t>([] { return std::string("metadata count"); });
  check_header_counts(n_tensors, n_kv, r.remaining());
  read_metadata(r, n_kv, kv_);
  alignment_ = read_alignment(kv_);
  read_tensor_infos(r, n_tensors, alignment_, tensors_);

  const uint64_t header_end = r.pos();
  if (add_overflows(header_end, alignment_ - 1, &data_offset_))
    fail(ErrorCode::Corrupt, "alignment " + std::to_string(alignment_) + " pushes the data section past 2^64");
  data_offset_ &= ~(alignment_ - 1);
  // A file without tensors (a vocabulary-only GGUF) may end right after its
  // header, before the padding; so the data offset is only checked per tensor.
  place_tensors(tensors_, base_, size_, data_offset_, alignment_);
  check_no_overlap(tensors_);
}

const Value* File::find(std::string_view key) const {
  for (const KeyValue& p : kv_)
    if (p.key == key) return &p.value;
  return nullptr;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  for (const TensorInfo& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

namespace {

const Value& require(const File& f, std::string_view key) {
  const Value* v = f.find(key);
  if (!v) fail(ErrorCode::Corrupt, "required key " + quoted(key) + " is missing (file " + quoted(f.path()) + ")");
  return *v;
}

[[noreturn]] void wrong_type(const File& f, std::string_view key, const Value& v, const char* expected) {
  std::string have = value_type_name(v.type);
  if (v.type == ValueType::ARRAY) have += std::string(" of ") + value_type_name(v.array_type);
  fail(ErrorCode::Corrupt, "key " + quoted(key) + " has type " + have + ", expected " + expected + " (file " +
                               quoted(f.path()) + ")");
}

uint64_t as_uint(const File& f, std::string_view key, const Value& v) {
  switch (v.type) {
    case ValueType::U8: case ValueType::U16: case ValueType::U32: case ValueType::U64: return v.u;
    case ValueType::I8: case ValueType::I16: case ValueType::I32: case ValueType::I64:
      if (v.i < 0)
        fail(ErrorCode::Corrupt, "key " + quoted(key) + " = " + std::to_string(v.i) +
                                     " is negative, expected an unsigned integer (file " + quoted(f.path()) + ")");
      return uint64_t(v.i);
    default: wrong_type(f, key, v, "an unsigned integer");
  }
}

double as_float(const File& f, std::string_view key, const Value& v) {
  if (v.type != ValueType::F32 && v.type != ValueType::F64) wrong_type(f, key, v, "f32 or f64");
  return v.f;
}

std::string as_string(const File& f, std::string_view key, const Value& v) {
  if (v.type != ValueType::STRING) wrong_type(f, key, v, "string");
  return std::string(v.s);
}

const Value& require_array(const File& f, std::string_view key, ValueType elem, const char* expected) {
  const Value& v = require(f, key);
  if (v.type != ValueType::ARRAY || v.array_type != elem) wrong_type(f, key, v, expected);
  return v;
}

}  // namespace

std::string File::get_string(std::string_view key) const { return as_string(*this, key, require(*this, key)); }

std::optional<std::string> File::opt_string(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  return as_string(*this, key, *v);
}

uint64_t File::get_uint(std::string_view key) const { return as_uint(*this, key, require(*this, key)); }

std::optional<uint64_t> File::opt_uint(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  return as_uint(*this, key, *v);
}

double File::get_float(std::string_view key) const { return as_float(*this, key, require(*this, key)); }

std::optional<double> File::opt_float(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  return as_float(*this, key, *v);
}

std::optional<bool> File::opt_bool(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::BOOL) wrong_type(*this, key, *v, "bool");
  return v->u != 0;
}

std::vector<std::string_view> File::get_string_array(std::string_view key) const {
  return require_array(*this, key, ValueType::STRING, "array of string").strings;
}

std::vector<float> File::get_f32_array(std::string_view key) const {
  const Value& v = require_array(*this, key, ValueType::F32, "array of f32");
  std::vector<float> out(v.array_count);
  if (v.array_count) std::memcpy(out.data(), v.array_data, v.array_count * sizeof(float));
  return out;
}

std::vector<int32_t> File::get_i32_array(std::string_view key) const {
  const Value* v = &require(*this, key);
  if (v->type != ValueType::ARRAY || (v->array_type != ValueType::I32 && v->array_type != ValueType::U32))
    wrong_type(*this, key, *v, "array of i32 or u32");
  std::vector<int32_t> out(v->array_count);
  if (v->array_count) std::memcpy(out.data(), v->array_data, v->array_count * sizeof(int32_t));
  if (v->array_type == ValueType::U32) {
    for (uint64_t i = 0; i < v->array_count; ++i)
      if (out[i] < 0)
        fail(ErrorCode::Corrupt, "key " + quoted(key) + " element " + std::to_string(i) + " = " +
                                     std::to_string(uint32_t(out[i])) + " does not fit in i32 (file " +
                                     quoted(path_) + ")");
  }
  return out;
}

}  // namespace kvg::gguf
