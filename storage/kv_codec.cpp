#include "storage/kv_codec.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/kv_rounding.hpp"
#include "storage/little_endian.hpp"

namespace kvg {

namespace kr = kv_rounding;

namespace {

uint16_t load_u16_le(const uint8_t* p) { return uint16_t(p[0] | p[1] << 8); }

bool is_canonical_bf16(uint16_t h) { return (h & 0x7fffu) <= 0x7f80u || h == (kr::kCanonicalNan >> 16); }

// f32 bits of a float from memory, and back (rows are float arrays in host order).
uint32_t bits_at(const float* p) { return kr::bits_of(*p); }

bool encode_bf16_row(const float* x, uint32_t n, uint8_t* out) {
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t u = bits_at(x + i);
    if (kr::bf16_round_bits(u) != u) return false;
    out[2 * i] = uint8_t(u >> 16);
    out[2 * i + 1] = uint8_t(u >> 24);
  }
  return true;
}

bool encode_i8_row(const float* x, uint32_t n, uint8_t* out) {
  const uint32_t amax = kr::row_amax_bits(x, int(n));
  if (!kr::is_finite_bits(amax)) return false;  // int8 has no NaN or infinity
  const int e = kr::i8_exponent(amax);
  out[0] = uint8_t(int8_t(e));
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t u = bits_at(x + i);
    const int q = kr::i8_quantize(u, e);
    if (kr::i8_value_bits(q, e) != u) return false;
    out[1 + i] = uint8_t(int8_t(q));
  }
  return true;
}

}  // namespace

bool is_known_kv_dtype(uint32_t dtype) { return dtype <= kKvDtypeI8; }

std::string kv_dtype_name(uint32_t dtype) {
  switch (dtype) {
    case kKvDtypeF32: return "f32";
    case kKvDtypeBf16: return "bf16";
    case kKvDtypeI8: return "i8";
    default: return std::to_string(dtype);
  }
}

uint64_t kv_row_bytes(uint32_t dtype, uint64_t head_dim) {
  switch (dtype) {
    case kKvDtypeF32: return 4 * head_dim;
    case kKvDtypeBf16: return 2 * head_dim;
    case kKvDtypeI8: return 1 + head_dim;
    default: return 0;
  }
}

size_t encode_kv_rows(uint32_t dtype, uint32_t head_dim, const float* rows, size_t n_rows, uint8_t* out) {
  const size_t row_bytes = size_t(kv_row_bytes(dtype, head_dim));
  for (size_t r = 0; r < n_rows; ++r) {
    const float* x = rows + r * head_dim;
    uint8_t* o = out + r * row_bytes;
    bool ok = true;
    switch (dtype) {
      case kKvDtypeF32:
        for (uint32_t i = 0; i < head_dim; ++i) store_u32_le(o + 4 * i, bits_at(x + i));
        break;
      case kKvDtypeBf16: ok = encode_bf16_row(x, head_dim, o); break;
      case kKvDtypeI8: ok = encode_i8_row(x, head_dim, o); break;
      default: ok = false;
    }
    if (!ok) return r;
  }
  return n_rows;
}

std::optional<std::string> kv_row_problem(uint32_t dtype, uint32_t head_dim, const uint8_t* row) {
  if (dtype == kKvDtypeBf16) {
    for (uint32_t i = 0; i < head_dim; ++i)
      if (!is_canonical_bf16(load_u16_le(row + 2 * i)))
        return "bf16 element " + std::to_string(i) + " is a NaN other than the canonical 0x7fc0";
  } else if (dtype == kKvDtypeI8) {
    const int e = int8_t(row[0]);
    if (e > kr::kI8MaxExponent)
      return "int8 row exponent " + std::to_string(e) + " is above " + std::to_string(kr::kI8MaxExponent);
    int largest = 0;
    for (uint32_t i = 0; i < head_dim; ++i) {
      const int q = int8_t(row[1 + i]);
      if (q == -128) return "int8 element " + std::to_string(i) + " is -128 (the range is -127..127)";
      largest = q < 0 ? (-q > largest ? -q : largest) : (q > largest ? q : largest);
    }
    if (e > kr::kI8MinExponent && largest < kr::kI8MinLeading)
      return "int8 row's largest |q| is " + std::to_string(largest) + " < " + std::to_string(kr::kI8MinLeading) +
             " with exponent " + std::to_string(e) + " (not the smallest exponent)";
  }
  return std::nullopt;
}

void decode_kv_rows(uint32_t dtype, uint32_t head_dim, const uint8_t* in, size_t n_rows, float* out) {
  const size_t n = n_rows * head_dim;
  switch (dtype) {
    case kKvDtypeF32:
      for (size_t i = 0; i < n; ++i) out[i] = kr::float_of(load_u32_le(in + 4 * i));
      return;
    case kKvDtypeBf16:
      for (size_t i = 0; i < n; ++i) out[i] = kr::float_of(uint32_t(load_u16_le(in + 2 * i)) << 16);
      return;
    case kKvDtypeI8:
      for (size_t r = 0; r < n_rows; ++r) {
        const uint8_t* row = in + r * (1 + size_t(head_dim));
        const int e = int8_t(row[0]);
        float* x = out + r * head_dim;
        if (e >= -126) {
          // 2^e and every nonzero q * 2^e are normal and q * 2^e is exact, so
          // one multiply gives i8_value_bits' bits on any IEEE machine, with
          // or without flush-to-zero (and +0 for q = 0); it vectorizes.
          const float scale = kr::float_of(uint32_t(e + 127) << 23);
          for (uint32_t i = 0; i < head_dim; ++i) x[i] = float(int8_t(row[1 + i])) * scale;
        } else {
          for (uint32_t i = 0; i < head_dim; ++i) x[i] = kr::float_of(kr::i8_value_bits(int8_t(row[1 + i]), e));
        }
      }
      return;
    default:
      return;
  }
}

KvRowPlace locate_kv_row(uint64_t payload_row, uint32_t n_head_kv, uint64_t n_tokens, uint64_t position_start) {
  const uint64_t per_block = n_tokens * n_head_kv;
  const uint64_t block = payload_row / per_block, in_block = payload_row % per_block;
  return {block / 2, block % 2 == 1, position_start + in_block / n_head_kv, uint32_t(in_block % n_head_kv)};
}

std::string kv_row_place(uint64_t payload_row, uint32_t n_head_kv, uint64_t n_tokens, uint64_t position_start) {
  const KvRowPlace p = locate_kv_row(payload_row, n_head_kv, n_tokens, position_start);
  return "layer " + std::to_string(p.layer) + (p.is_v ? " V" : " K") + ", token " + std::to_string(p.token) +
         ", head " + std::to_string(p.head);
}

KvPayloadChecker::KvPayloadChecker(uint32_t dtype, uint32_t n_head_kv, uint32_t head_dim, uint64_t n_tokens,
                                   uint64_t position_start)
    : dtype_(dtype),
      n_head_kv_(n_head_kv),
      head_dim_(head_dim),
      row_bytes_(kv_row_bytes(dtype, head_dim)),
      rows_per_block_(n_tokens * n_head_kv),
      position_start_(position_start) {}

std::string KvPayloadChecker::place(uint64_t payload_row) const {
  return kv_row_place(payload_row, n_head_kv_, rows_per_block_ / n_head_kv_, position_start_);
}

std::optional<std::string> KvPayloadChecker::check_row(const uint8_t* row) {
  auto problem = kv_row_problem(dtype_, head_dim_, row);
  if (problem) problem = place(row_index_) + ": " + *problem;
  ++row_index_;
  return problem;
}

std::optional<std::string> KvPayloadChecker::feed(const uint8_t* data, size_t n) {
  if (dtype_ == kKvDtypeF32) return std::nullopt;  // every bit pattern is a value
  if (!partial_.empty()) {
    const size_t k = std::min<size_t>(n, size_t(row_bytes_) - partial_.size());
    partial_.append(reinterpret_cast<const char*>(data), k);
    data += k, n -= k;
    if (partial_.size() < row_bytes_) return std::nullopt;
    auto problem = check_row(reinterpret_cast<const uint8_t*>(partial_.data()));
    partial_.clear();
    if (problem) return problem;
  }
  for (; n >= row_bytes_; data += row_bytes_, n -= size_t(row_bytes_))
    if (auto problem = check_row(data)) return problem;
  partial_.assign(reinterpret_cast<const char*>(data), n);
  return std::nullopt;
}

}  // namespace kvg
