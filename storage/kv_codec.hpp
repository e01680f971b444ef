// The KV payload's element types (artifact kv_dtype): how one row — one KV
// head's head_dim values of one token, K or V — is laid out in bytes, and
// which bytes are canonical. docs/artifact-format.md, section 3, is normative.
//
//   f32  (0): head_dim binary32 LE, any bit pattern
//   bf16 (1): head_dim u16 LE, the high halves of binary32 values; the only
//             NaN is 0x7fc0
//   i8   (2): one signed exponent byte e, then head_dim int8 q; the row is
//             q * 2^e; canonical: -128 <= e <= 121, no q = -128, and the
//             largest |q| >= 64 unless e = -128 (an all-zero row: e = -128)
//
// The floats a compact row encodes are exactly the fixed points of the
// storage's rounding (kernels/kv_rounding.hpp, whose integer arithmetic this
// codec shares): encoding refuses anything else, because a cache that was not
// rounded as it was written would graft back values a fresh run never used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace kvg {

inline constexpr uint32_t kKvDtypeF32 = 0;
inline constexpr uint32_t kKvDtypeBf16 = 1;
inline constexpr uint32_t kKvDtypeI8 = 2;

bool is_known_kv_dtype(uint32_t dtype);
// "f32", "bf16", "i8"; the number for an unknown one.
std::string kv_dtype_name(uint32_t dtype);
// Bytes of one row of head_dim values (0 for an unknown dtype).
uint64_t kv_row_bytes(uint32_t dtype, uint64_t head_dim);

// Encodes n_rows rows of head_dim floats (contiguous) into n_rows *
// kv_row_bytes bytes. Returns n_rows, or the index of the first row that is
// not a fixed point of the dtype's rounding (out is then unspecified).
size_t encode_kv_rows(uint32_t dtype, uint32_t head_dim, const float* rows, size_t n_rows, uint8_t* out);

// Why one encoded row is not canonical, or nullopt when it is.
std::optional<std::string> kv_row_problem(uint32_t dtype, uint32_t head_dim, const uint8_t* row);

// Decodes n_rows canonical rows (check them with kv_row_problem or
// KvPayloadChecker first) into n_rows * head_dim floats.
void decode_kv_rows(uint32_t dtype, uint32_t head_dim, const uint8_t* in, size_t n_rows, float* out);

// Where the payload_row-th row of a payload lies (rows counted from its
// start, K block then V block per layer).
struct KvRowPlace {
  uint64_t layer;
  bool is_v;
  uint64_t token;  // absolute position
  uint32_t head;
};
KvRowPlace locate_kv_row(uint64_t payload_row, uint32_t n_head_kv, uint64_t n_tokens, uint64_t position_start);
// "layer 2 V, token 7, head 1".
std::string kv_row_place(uint64_t payload_row, uint32_t n_head_kv, uint64_t n_tokens, uint64_t position_start);

// Checks a payload's canonical form as its bytes stream past in order, in
// pieces of any size (a row may straddle two pieces).
class KvPayloadChecker {
 public:
  KvPayloadChecker(uint32_t dtype, uint32_t n_head_kv, uint32_t head_dim, uint64_t n_tokens, uint64_t position_start);
  // The first non-canonical row's place and problem ("layer 2 V, token 7,
  // head 1: ..."), or nullopt. After a problem the checker is spent.
  std::optional<std::string> feed(const uint8_t* data, size_t n);
  // kv_row_place of this payload's row.
  std::string place(uint64_t payload_row) const;

 private:
  std::optional<std::string> check_row(const uint8_t* row);

  uint32_t dtype_, n_head_kv_, head_dim_;
  uint64_t row_bytes_, rows_per_block_, position_start_;
  uint64_t row_index_ = 0;  // rows completed since the payload's start
  std::string partial_;     // the bytes of a row cut by a piece boundary
};

}  // namespace kvg
