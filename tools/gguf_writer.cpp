// GGUF writer. Metadata is encoded when added (it is small); tensor data is
// pulled from producers while writing, so a multi-gigabyte model streams
// through a fixed-size buffer.
#include "tools/gguf_writer.hpp"

#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>

#include <fcntl.h>
#include <unistd.h>

namespace kvg::gguf {

static_assert(std::endian::native == std::endian::little, "GGUF writer assumes a little-endian host");

namespace {

[[noreturn]] void invalid(const std::string& message) { throw Error(ErrorCode::InvalidArgument, "GGUF writer: " + message); }

template <class T>
void put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

}  // namespace

namespace detail {

class WriterOutput {
 public:
  virtual ~WriterOutput() = default;
  virtual void append(const void* data, size_t n) = 0;
  uint64_t pos() const { return pos_; }
  void zeros(uint64_t n) {
    static const uint8_t kZero[64] = {};
    while (n) {
      const size_t k = n < sizeof(kZero) ? size_t(n) : sizeof(kZero);
      append(kZero, k);
      n -= k;
    }
  }

 protected:
  uint64_t pos_ = 0;
};

}  // namespace detail

namespace {

using detail::WriterOutput;

class MemoryOutput final : public WriterOutput {
 public:
  explicit MemoryOutput(std::vector<uint8_t>& bytes) : bytes_(bytes) {}
  void append(const void* data, size_t n) override {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + n);
    pos_ += n;
  }

 private:
  std::vector<uint8_t>& bytes_;
};

class FileOutput final : public WriterOutput {
 public:
  explicit FileOutput(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error(ErrorCode::Io, "GGUF writer: cannot create '" + path + "': " + std::strerror(errno));
    buffer_.reserve(kBufferBytes);
  }
  ~FileOutput() override {
    if (fd_ >= 0) ::close(fd_);
  }
  void append(const void* data, size_t n) override {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    pos_ += n;
    if (buffer_.size() + n > kBufferBytes) flush();
    if (n >= kBufferBytes) {
      write_all(p, n);  // large pieces skip the copy
      return;
    }
    buffer_.insert(buffer_.end(), p, p + n);
  }
  void close() {
    flush();
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw Error(ErrorCode::Io, "GGUF writer: closing '" + path_ + "': " + std::strerror(errno));
  }

 private:
  static constexpr size_t kBufferBytes = size_t(8) << 20;
  void flush() {
    write_all(buffer_.data(), buffer_.size());
    buffer_.clear();
  }
  void write_all(const uint8_t* p, size_t n) {
    while (n) {
      const ssize_t k = ::write(fd_, p, n);
      if (k < 0) {
        if (errno == EINTR) continue;
        throw Error(ErrorCode::Io, "GGUF writer: writing '" + path_ + "': " + std::strerror(errno));
      }
      p += k;
      n -= size_t(k);
    }
  }
  std::string path_;
  int fd_ = -1;
  std::vector<uint8_t> buffer_;
};

// Counts what a producer writes so a short or long tensor is caught here,
// not by the reader of a misaligned file.
class CountingSink final : public TensorSink {
 public:
  CountingSink(WriterOutput& out, std::string_view name, uint64_t expected)
      : out_(out), name_(name), expected_(expected) {}
  void write(const void* data, size_t n) override {
    if (n > expected_ - written_)
      invalid("tensor '" + std::string(name_) + "': producer wrote more than its " + std::to_string(expected_) + " bytes");
    out_.append(data, n);
    written_ += n;
  }
  void finish() const {
    if (written_ != expected_)
      invalid("tensor '" + std::string(name_) + "': producer wrote " + std::to_string(written_) + " of " +
              std::to_string(expected_) + " bytes");
  }

 private:
  WriterOutput& out_;
  std::string_view name_;
  uint64_t expected_;
  uint64_t written_ = 0;
};

}  // namespace

const KeyLayout& Layout::key(std::string_view k) const {
  for (const KeyLayout& l : keys)
    if (l.key == k) return l;
  invalid("layout has no key '" + std::string(k) + "'");
}

const TensorLayout& Layout::tensor(std::string_view name) const {
  for (const TensorLayout& l : tensors)
    if (l.name == name) return l;
  invalid("layout has no tensor '" + std::string(name) + "'");
}

void Writer::set_version(uint32_t version) {
  if (version != 2 && version != 3) invalid("version " + std::to_string(version) + " cannot be written (2 or 3)");
  version_ = version;
}

void Writer::set_alignment(uint32_t alignment) {
  if (!std::has_single_bit(alignment)) invalid("alignment " + std::to_string(alignment) + " is not a power of two");
  alignment_ = alignment;
  // Calling it again changes the value rather than writing the key twice.
  for (EncodedKv& kv : kv_) {
    if (kv.key == "general.alignment") {
      kv = {kv.key, uint32_t(ValueType::U32), {}};
      put<uint32_t>(kv.payload, alignment);
      return;
    }
  }
  add_u32("general.alignment", alignment);
}

void Writer::add_scalar(std::string_view key, ValueType type, const void* v, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(v);
  kv_.push_back({std::string(key), uint32_t(type), std::vector<uint8_t>(p, p + n)});
}

void Writer::add_u8(std::string_view key, uint8_t v) { add_scalar(key, ValueType::U8, &v, sizeof v); }
void Writer::add_i8(std::string_view key, int8_t v) { add_scalar(key, ValueType::I8, &v, sizeof v); }
void Writer::add_u16(std::string_view key, uint16_t v) { add_scalar(key, ValueType::U16, &v, sizeof v); }
void Writer::add_i16(std::string_view key, int16_t v) { add_scalar(key, ValueType::I16, &v, sizeof v); }
void Writer::add_u32(std::string_view key, uint32_t v) { add_scalar(key, ValueType::U32, &v, sizeof v); }
void Writer::add_i32(std::string_view key, int32_t v) { add_scalar(key, ValueType::I32, &v, sizeof v); }
void Writer::add_u64(std::string_view key, uint64_t v) { add_scalar(key, ValueType::U64, &v, sizeof v); }
void Writer::add_i64(std::string_view key, int64_t v) { add_scalar(key, ValueType::I64, &v, sizeof v); }
void Writer::add_f32(std::string_view key, float v) { add_scalar(key, ValueType::F32, &v, sizeof v); }
void Writer::add_f64(std::string_view key, double v) { add_scalar(key, ValueType::F64, &v, sizeof v); }
void Writer::add_bool(std::string_view key, bool v) {
  const uint8_t b = v ? 1 : 0;
  add_scalar(key, ValueType::BOOL, &b, 1);
}
void Writer::add_string(std::string_view key, std::string_view v) {
  std::vector<uint8_t> payload;
  put_string(payload, v);
  kv_.push_back({std::string(key), uint32_t(ValueType::STRING), std::move(payload)});
}

void Writer::add_array_bytes(std::string_view key, ValueType elem, const void* data, uint64_t count, size_t elem_size) {
  std::vector<uint8_t> payload;
  payload.reserve(12 + count * elem_size);
  put<uint32_t>(payload, uint32_t(elem));
  put<uint64_t>(payload, count);
  const uint8_t* p = static_cast<const uint8_t*>(data);
  if (count) payload.insert(payload.end(), p, p + count * elem_size);
  kv_.push_back({std::string(key), uint32_t(ValueType::ARRAY), std::move(payload)});
}

void Writer::add_array(std::string_view key, std::span<const uint8_t> v) { add_array_bytes(key, ValueType::U8, v.data(), v.size(), 1); }
void Writer::add_array(std::string_view key, std::span<const int8_t> v) { add_array_bytes(key, ValueType::I8, v.data(), v.size(), 1); }
void Writer::add_array(std::string_view key, std::span<const uint16_t> v) { add_array_bytes(key, ValueType::U16, v.data(), v.size(), 2); }
void Writer::add_array(std::string_view key, std::span<const int16_t> v) { add_array_bytes(key, ValueType::I16, v.data(), v.size(), 2); }
void Writer::add_array(std::string_view key, std::span<const uint32_t> v) { add_array_bytes(key, ValueType::U32, v.data(), v.size(), 4); }
void Writer::add_array(std::string_view key, std::span<const int32_t> v) { add_array_bytes(key, ValueType::I32, v.data(), v.size(), 4); }
void Writer::add_array(std::string_view key, std::span<const uint64_t> v) { add_array_bytes(key, ValueType::U64, v.data(), v.size(), 8); }
void Writer::add_array(std::string_view key, std::span<const int64_t> v) { add_array_bytes(key, ValueType::I64, v.data(), v.size(), 8); }
void Writer::add_array(std::string_view key, std::span<const float> v) { add_array_bytes(key, ValueType::F32, v.data(), v.size(), 4); }
void Writer::add_array(std::string_view key, std::span<const double> v) { add_array_bytes(key, ValueType::F64, v.data(), v.size(), 8); }

void Writer::add_array(std::string_view key, std::span<const bool> v) {
  // sizeof(bool) is not fixed by the language; the format says one byte.
  std::vector<uint8_t> bytes(v.size());
  for (size_t i = 0; i < v.size(); ++i) bytes[i] = v[i] ? 1 : 0;
  add_array_bytes(key, ValueType::BOOL, bytes.data(), bytes.size(), 1);
}

void Writer::add_array(std::string_view key, std::span<const std::string> v) {
  std::vector<std::string_view> views(v.begin(), v.end());
  add_array(key, std::span<const std::string_view>(views));
}

void Writer::add_array(std::string_view key, std::span<const std::string_view> v) {
  std::vector<uint8_t> payload;
  put<uint32_t>(payload, uint32_t(ValueType::STRING));
  put<uint64_t>(payload, v.size());
  for (std::string_view s : v) put_string(payload, s);
  kv_.push_back({std::string(key), uint32_t(ValueType::ARRAY), std::move(payload)});
}

void Writer::add_raw(std::string_view key, uint32_t type, std::vector<uint8_t> payload) {
  kv_.push_back({std::string(key), type, std::move(payload)});
}

namespace {

// `what` names the tensor in messages ("tensor 'x'", or just "tensor").
uint64_t checked_tensor_bytes(const std::string& what, std::span<const uint64_t> ne, TensorType type) {
  const std::optional<BlockShape> block = block_shape(type);
  if (!block) invalid(what + ": unknown tensor type " + std::to_string(uint32_t(type)));
  if (ne.empty() || ne.size() > 4) invalid(what + " needs 1..4 dimensions, not " + std::to_string(ne.size()));
  uint64_t n = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] == 0) invalid(what + ": zero dimension ne[" + std::to_string(d) + "]");
    if (__builtin_mul_overflow(n, ne[d], &n) || n > uint64_t(std::numeric_limits<int64_t>::max()))
      invalid(what + ": element count overflows int64");
  }
  if (ne[0] % block->elements != 0)
    invalid(what + ": ne[0] = " + std::to_string(ne[0]) + " is not a multiple of the " + tensor_type_name(type) +
            " block size " + std::to_string(block->elements));
  return n / block->elements * block->bytes;
}

std::string tensor_what(std::string_view name) { return "tensor '" + std::string(name) + "'"; }

}  // namespace

uint64_t Writer::tensor_bytes(std::span<const uint64_t> ne, TensorType type) {
  return checked_tensor_bytes("tensor", ne, type);
}

void Writer::add_tensor(std::string_view name, std::vector<uint64_t> ne, TensorType type, std::vector<uint8_t> data) {
  const uint64_t n_bytes = checked_tensor_bytes(tensor_what(name), ne, type);
  if (data.size() != n_bytes)
    invalid(tensor_what(name) + ": " + std::to_string(data.size()) + " bytes given, shape needs " +
            std::to_string(n_bytes));
  auto shared = std::make_shared<const std::vector<uint8_t>>(std::move(data));
  tensors_.push_back({std::string(name), std::move(ne), type, n_bytes,
                      [shared](TensorSink& sink) { sink.write(shared->data(), shared->size()); }});
}

void Writer::add_tensor(std::string_view name, std::vector<uint64_t> ne, TensorType type, TensorProducer produce) {
  const uint64_t n_bytes = checked_tensor_bytes(tensor_what(name), ne, type);
  if (!produce) invalid(tensor_what(name) + ": no producer");
  tensors_.push_back({std::string(name), std::move(ne), type, n_bytes, std::move(produce)});
}

Layout Writer::emit(WriterOutput& out) const {
  Layout layout;
  // The header is small next to the data; build it in memory so the offsets
  // are simply positions in this buffer.
  std::vector<uint8_t> h;
  h.insert(h.end(), {'G', 'G', 'U', 'F'});
  put<uint32_t>(h, version_);
  put<uint64_t>(h, tensors_.size());
  put<uint64_t>(h, kv_.size());
  for (const EncodedKv& kv : kv_) {
    KeyLayout& l = layout.keys.emplace_back();
    l.key = kv.key;
    l.key_at = h.size();
    put_string(h, kv.key);
    l.type_at = h.size();
    put<uint32_t>(h, kv.type);
    l.value_at = h.size();
    h.insert(h.end(), kv.payload.begin(), kv.payload.end());
    l.end = h.size();
  }
  uint64_t offset = 0;
  for (const Pending& t : tensors_) {
    TensorLayout& l = layout.tensors.emplace_back();
    l.name = t.name;
    l.name_at = h.size();
    put_string(h, t.name);
    l.n_dims_at = h.size();
    put<uint32_t>(h, uint32_t(t.ne.size()));
    l.ne_at = h.size();
    for (uint64_t d : t.ne) put<uint64_t>(h, d);
    l.type_at = h.size();
    put<uint32_t>(h, uint32_t(t.type));
    l.offset_at = h.size();
    put<uint64_t>(h, offset);
    l.data_at = offset;  // made absolute below
    l.n_bytes = t.n_bytes;
    offset = (offset + t.n_bytes + alignment_ - 1) & ~(alignment_ - 1);
  }
  layout.header_end = h.size();
  layout.data_offset = (layout.header_end + alignment_ - 1) & ~(alignment_ - 1);
  out.append(h.data(), h.size());

  // Padding after every tensor, the last included, as llama.cpp writes it.
  if (!tensors_.empty()) out.zeros(layout.data_offset - layout.header_end);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Pending& t = tensors_[i];
    TensorLayout& l = layout.tensors[i];
    l.data_at += layout.data_offset;
    CountingSink sink(out, t.name, t.n_bytes);
    t.produce(sink);
    sink.finish();
    out.zeros((alignment_ - out.pos() % alignment_) % alignment_);
  }
  layout.file_size = out.pos();
  return layout;
}

Layout Writer::write(const std::string& path) const {
  // A crash or a failing producer must not leave a truncated model under the
  // real name, where it would look like a corrupt download.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  try {
    FileOutput out(tmp);
    Layout layout = emit(out);
    out.close();
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      throw Error(ErrorCode::Io, "GGUF writer: renaming '" + tmp + "' to '" + path + "': " + std::strerror(errno));
    return layout;
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
}

std::vector<uint8_t> Writer::serialize(Layout* layout) const {
  std::vector<uint8_t> bytes;
  MemoryOutput out(bytes);
  Layout l = emit(out);
  if (layout) *layout = std::move(l);
  return bytes;
}

}  // namespace kvg::gguf
