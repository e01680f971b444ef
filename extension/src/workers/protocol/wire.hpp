// One encoding for every message between kvg's backends and its three
// workers (the engine worker, the writer, the verifier). A message lists its
// fields once, in `template <class F> void fields(F& f) { f(a), f(b), ...; }`,
// and that one list is walked by the encoder, the decoder and the two size
// counters, so the ends cannot disagree on a field's place or type.
//
// The bytes: fixed-width numbers in the machine's byte order (both ends are
// this build on this machine: one server's processes), a bool and an
// optional's presence as one byte 0 or 1, a string, vector or byte block
// after its length as a uint64, a variant after its alternative's tag byte
// (each alternative's `static constexpr uint8_t kTag`).
//
// Decoding trusts nothing: every length is checked against the bytes left
// before anything is allocated for it, a flag other than 0 or 1 or a tag of
// no alternative is refused, a message may check its own values
// (`void validate() const`, throwing ProtocolError), and a message must end
// exactly where its bytes end. Each refusal is a ProtocolError: a kvg::Error
// (Corrupt) that says what was wrong, never a crash or a read past the end.
// A decoded std::string_view points into the bytes decoded: they must
// outlive it.
//
// No PostgreSQL here (the folder's rule): tests/workers/ tests it without a
// server.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "common/error.hpp"

namespace kvg::worker_protocol {

class ProtocolError : public Error {
 public:
  explicit ProtocolError(const std::string& what) : Error(ErrorCode::Corrupt, "kvg: a worker's message " + what) {}
};

namespace detail {

template <class T> struct IsArray : std::false_type {};
template <class T, size_t N> struct IsArray<std::array<T, N>> : std::true_type {};
template <class T> struct IsVector : std::false_type {};
template <class T> struct IsVector<std::vector<T>> : std::true_type {};
template <class T> struct IsOptional : std::false_type {};
template <class T> struct IsOptional<std::optional<T>> : std::true_type {};
template <class T> struct IsVariant : std::false_type {};
template <class... T> struct IsVariant<std::variant<T...>> : std::true_type {};

// Copied as their bytes: numbers and enums (a bool is not: only 0 and 1 are
// bools) and fixed arrays of them. An enum's value is not checked here: the
// side that uses it does (it may be any value of its underlying type).
template <class T>
constexpr bool is_block() {
  if constexpr (std::is_same_v<T, bool>) return false;
  else if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T>) return true;
  else if constexpr (IsArray<T>::value) return is_block<typename T::value_type>();
  else return false;
}

template <class T>
constexpr bool is_text = std::is_same_v<T, std::string> || std::is_same_v<T, std::string_view>;

// Bytes shared with other owners (an artifact held by a cache and a call).
using SharedBytes = std::shared_ptr<const std::vector<uint8_t>>;

template <class V, size_t... I>
constexpr bool distinct_tags(std::index_sequence<I...>) {
  const uint8_t tags[] = {std::variant_alternative_t<I, V>::kTag...};
  for (size_t a = 0; a < sizeof...(I); ++a)
    for (size_t b = a + 1; b < sizeof...(I); ++b)
      if (tags[a] == tags[b]) return false;
  return true;
}

template <class V>
constexpr void check_tags() {
  static_assert(distinct_tags<V>(std::make_index_sequence<std::variant_size_v<V>>()),
                "each alternative of a message variant needs a kTag of its own");
}

// The fewest bytes a value of a type can take: what a count of them is
// checked against before a vector of them is allocated.
class MinimumSize {
 public:
  size_t bytes = 0;
  template <class T>
  void operator()(T& value) {
    if constexpr (std::is_same_v<T, bool> || IsOptional<T>::value || IsVariant<T>::value) bytes += 1;
    else if constexpr (is_block<T>()) bytes += sizeof(T);
    else if constexpr (is_text<T> || IsVector<T>::value || std::is_same_v<T, SharedBytes>) bytes += sizeof(uint64_t);
    else value.fields(*this);
  }
};

template <class T>
size_t minimum_size() {
  static const size_t bytes = [] {
    MinimumSize counter;
    T probe{};
    counter(probe);
    return counter.bytes > 0 ? counter.bytes : size_t(1);
  }();
  return bytes;
}

}  // namespace detail

// Where an encoder puts bytes: counted only, or copied into a place that
// holds exactly what was counted.
class SizeSink {
 public:
  void put(const void*, size_t n) { bytes += n; }
  size_t bytes = 0;
};

class SpanSink {
 public:
  SpanSink(char* at, size_t capacity) : at_(at), left_(capacity) {}
  void put(const void* data, size_t n) {
    if (n > left_) throw ProtocolError("does not fit the place it is written to");
    if (n > 0) std::memcpy(at_, data, n);
    at_ += n;
    left_ -= n;
  }
  size_t left() const { return left_; }

 private:
  char* at_;
  size_t left_;
};

template <class Sink>
class Encoder {
 public:
  explicit Encoder(Sink& sink) : sink_(sink) {}

  template <class T>
  void operator()(const T& value) {
    if constexpr (std::is_same_v<T, bool>) {
      byte(value ? 1 : 0);
    } else if constexpr (detail::is_block<T>()) {
      sink_.put(&value, sizeof(T));
    } else if constexpr (detail::is_text<T>) {
      length(value.size());
      sink_.put(value.data(), value.size());
    } else if constexpr (detail::IsVector<T>::value) {
      length(value.size());
      using Item = typename T::value_type;
      if constexpr (detail::is_block<Item>())
        sink_.put(value.data(), value.size() * sizeof(Item));
      else
        for (const Item& item : value) (*this)(item);
    } else if constexpr (detail::IsOptional<T>::value) {
      byte(value.has_value() ? 1 : 0);
      if (value) (*this)(*value);
    } else if constexpr (std::is_same_v<T, detail::SharedBytes>) {
      if (value) (*this)(*value);
      else length(0);
    } else if constexpr (detail::IsVariant<T>::value) {
      detail::check_tags<T>();
      std::visit([this](const auto& alternative) {
        byte(std::decay_t<decltype(alternative)>::kTag);
        (*this)(alternative);
      }, value);
    } else {
      // fields() is one list for reading and writing, so it takes a mutable
      // message; the encoder only reads through it.
      const_cast<T&>(value).fields(*this);
    }
  }

 private:
  void byte(uint8_t b) { sink_.put(&b, 1); }
  void length(size_t n) {
    const uint64_t wide = n;
    sink_.put(&wide, sizeof(wide));
  }
  Sink& sink_;
};

class Decoder {
 public:
  explicit Decoder(std::string_view bytes) : in_(bytes) {}

  template <class T>
  void operator()(T& value) {
    if constexpr (std::is_same_v<T, bool>) {
      value = flag();
    } else if constexpr (detail::is_block<T>()) {
      std::memcpy(static_cast<void*>(&value), take(sizeof(T)), sizeof(T));
    } else if constexpr (detail::is_text<T>) {
      const size_t n = count(1);
      value = T(take(n), n);
    } else if constexpr (detail::IsVector<T>::value) {
      vector(value);
    } else if constexpr (detail::IsOptional<T>::value) {
      value.reset();
      if (flag()) (*this)(value.emplace());
    } else if constexpr (std::is_same_v<T, detail::SharedBytes>) {
      std::vector<uint8_t> bytes;
      (*this)(bytes);
      value = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
    } else if constexpr (detail::IsVariant<T>::value) {
      detail::check_tags<T>();
      alternative(take(1)[0], value, std::make_index_sequence<std::variant_size_v<T>>());
    } else {
      value.fields(*this);
      if constexpr (requires { value.validate(); }) value.validate();
    }
  }

  // Refuses bytes left over: a message is exactly its bytes.
  void finish() const {
    if (at_ != in_.size())
      throw ProtocolError("has " + std::to_string(in_.size() - at_) + " bytes more than its fields");
  }

 private:
  const char* take(size_t n) {
    if (n > in_.size() - at_) throw ProtocolError("is cut short");
    const char* p = in_.data() + at_;
    at_ += n;
    return p;
  }
  bool flag() {
    const uint8_t b = uint8_t(take(1)[0]);
    if (b > 1) throw ProtocolError("has a flag that is neither 0 nor 1");
    return b == 1;
  }
  // A count of items of at least `item_bytes` each, refused unless the bytes
  // left can hold that many: before anything is allocated for them.
  size_t count(size_t item_bytes) {
    uint64_t n = 0;
    std::memcpy(&n, take(sizeof(n)), sizeof(n));
    if (n > (in_.size() - at_) / item_bytes) throw ProtocolError("has a length beyond its bytes");
    return size_t(n);
  }
  template <class Item>
  void vector(std::vector<Item>& items) {
    if constexpr (detail::is_block<Item>()) {
      const size_t n = count(sizeof(Item));
      items.resize(n);
      if (n > 0) std::memcpy(static_cast<void*>(items.data()), take(n * sizeof(Item)), n * sizeof(Item));
    } else {
      const size_t n = count(detail::minimum_size<Item>());
      items.clear();
      items.reserve(n);
      for (size_t i = 0; i < n; ++i) (*this)(items.emplace_back());
    }
  }
  template <class V, size_t... I>
  void alternative(char tag, V& value, std::index_sequence<I...>) {
    const bool known = ((uint8_t(tag) == std::variant_alternative_t<I, V>::kTag
                             ? ((*this)(value.template emplace<I>()), true)
                             : false) ||
                        ...);
    if (!known) throw ProtocolError("is of no known kind (tag " + std::to_string(uint8_t(tag)) + ")");
  }

  std::string_view in_;
  size_t at_ = 0;
};

template <class M>
size_t encoded_size(const M& message) {
  SizeSink sink;
  Encoder<SizeSink> encoder(sink);
  encoder(message);
  return sink.bytes;
}

// Writes exactly encoded_size(message) bytes at `out`; ProtocolError when
// they are more than `capacity`.
template <class M>
void encode_into(const M& message, char* out, size_t capacity) {
  SpanSink sink(out, capacity);
  Encoder<SpanSink> encoder(sink);
  encoder(message);
}

template <class M>
std::string encode(const M& message) {
  std::string out(encoded_size(message), '\0');
  encode_into(message, out.data(), out.size());
  return out;
}

template <class M>
M decode(std::string_view bytes) {
  Decoder decoder(bytes);
  M message{};
  decoder(message);
  decoder.finish();
  return message;
}

// A message in a place whose size its reader does not know exactly (a chunk
// of a shared memory segment, a slot's buffer): its length, then its bytes.
template <class M>
size_t framed_size(const M& message) {
  return sizeof(uint64_t) + encoded_size(message);
}

template <class M>
void encode_framed(const M& message, char* place, size_t capacity) {
  const uint64_t n = encoded_size(message);
  if (capacity < sizeof(n) || n > capacity - sizeof(n))
    throw ProtocolError("does not fit the place it is written to");
  std::memcpy(place, &n, sizeof(n));
  encode_into(message, place + sizeof(n), size_t(n));
}

// `available`: the bytes from `place` to the end of what the reader mapped.
template <class M>
M decode_framed(const char* place, size_t available) {
  uint64_t n = 0;
  if (available < sizeof(n)) throw ProtocolError("is cut short");
  std::memcpy(&n, place, sizeof(n));
  if (n > available - sizeof(n)) throw ProtocolError("has a length beyond its bytes");
  return decode<M>(std::string_view(place + sizeof(n), size_t(n)));
}

}  // namespace kvg::worker_protocol
