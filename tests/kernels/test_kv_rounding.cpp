// The compact KV storages' rounding (kernels/kv_rounding.hpp) and its row
// codec (storage/kv_codec.hpp): hand-computed values at every edge (ties to
// even, the 63.5 boundary, the exponent clamp, zero rows, subnormals,
// overflow, NaN), an independent double-precision reference over random
// rows, idempotence, and lossless encode/decode of every rounded row.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "kernels/cpu/kv_rounding.hpp"
#include "kernels/kv_rounding.hpp"
#include "storage/kv_codec.hpp"

namespace kvg {
namespace {

namespace kr = kv_rounding;

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }
float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

uint32_t bf16_of(uint32_t u) { return kr::bf16_round_bits(u); }

TEST(KvRoundingBf16, RoundsToNearestWithTiesToEven) {
  EXPECT_EQ(bf16_of(0x3f800000u), 0x3f800000u);  // 1.0 is a bf16 value
  EXPECT_EQ(bf16_of(0x3f807fffu), 0x3f800000u);  // below half an ulp: down
  EXPECT_EQ(bf16_of(0x3f808000u), 0x3f800000u);  // 1 + 2^-8, a tie: to the even 0x3f80
  EXPECT_EQ(bf16_of(0x3f808001u), 0x3f810000u);  // above the tie: up
  EXPECT_EQ(bf16_of(0x3f818000u), 0x3f820000u);  // a tie next to the odd 0x3f81: up to even
  EXPECT_EQ(bf16_of(0xbf818000u), 0xbf820000u);  // sign-magnitude: the same for negatives
  EXPECT_EQ(bf16_of(0x3fffffffu), 0x40000000u);  // carry into the exponent: 2.0
  EXPECT_EQ(bf16_of(0x80000000u), 0x80000000u);  // -0 stays -0
  EXPECT_EQ(bf16_of(0x00008000u), 0x00000000u);  // smallest subnormals: a tie down to 0
  EXPECT_EQ(bf16_of(0x00018000u), 0x00020000u);  // a subnormal tie up to even
  EXPECT_EQ(bf16_of(0x007fffffu), 0x00800000u);  // the largest subnormal rounds to the smallest normal
  EXPECT_EQ(bf16_of(0x7f7fffffu), 0x7f800000u);  // FLT_MAX overflows to infinity, as IEEE rounding does
  EXPECT_EQ(bf16_of(0x7f800000u), 0x7f800000u);  // infinities stay
  EXPECT_EQ(bf16_of(0xff800000u), 0xff800000u);
  EXPECT_EQ(bf16_of(0x7f800001u), kr::kCanonicalNan);  // a NaN whose payload is in the dropped half stays NaN
  EXPECT_EQ(bf16_of(0xffc00000u), kr::kCanonicalNan);
}

TEST(KvRoundingBf16, AgreesWithADoublePrecisionReference) {
  // bf16 rounding of x = the double nearest-even rounding to 8 significant bits.
  uint64_t state = 1;
  for (int i = 0; i < 200000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const uint32_t u = uint32_t(state >> 32);
    if (!kr::is_finite_bits(u) || (u & 0x7f800000u) == 0) continue;  // normals here; subnormals above
    const double x = from_bits(u);
    int exp;
    std::frexp(x, &exp);
    const double ulp = std::ldexp(1.0, exp - 8);
    const double expected = std::nearbyint(x / ulp) * ulp;  // default rounding: to nearest, ties to even
    const float got = from_bits(bf16_of(u));
    if (std::isinf(got)) {
      EXPECT_GE(std::fabs(expected), 0x1p128) << std::hex << u;
      continue;
    }
    ASSERT_EQ(double(got), expected) << std::hex << u;
  }
}

struct I8Case {
  std::vector<float> row;
  int exponent;
  std::vector<int> q;
};

void expect_i8(const I8Case& c) {
  const int e = kr::i8_exponent(kr::row_amax_bits(c.row.data(), int(c.row.size())));
  EXPECT_EQ(e, c.exponent);
  std::vector<float> rounded = c.row;
  kr::round_i8_row(rounded.data(), int(rounded.size()));
  for (size_t i = 0; i < c.row.size(); ++i) {
    EXPECT_EQ(kr::i8_quantize(bits(c.row[i]), e), c.q[i]) << "element " << i;
    EXPECT_EQ(double(rounded[i]), std::ldexp(double(c.q[i]), c.exponent)) << "element " << i;
  }
}

TEST(KvRoundingI8, ExponentIsTheSmallestThatHoldsTheLargestMagnitude) {
  expect_i8({{127.0f, -1.0f}, 0, {127, -1}});        // 127 <= 127 * 2^0, not <= 127 * 2^-1
  expect_i8({{1.0f}, -6, {64}});                      // 127/64 >= 1 > 127/128
  expect_i8({{-1.0f, 0.5f}, -6, {-64, 32}});          // the sign does not matter for the scale
  expect_i8({{15.875f}, -3, {127}});                  // exactly 127 * 2^-3
  expect_i8({{200.0f, 3.0f, 5.0f}, 1, {100, 2, 2}});  // 1.5 -> 2 and 2.5 -> 2: ties to even
}

TEST(KvRoundingI8, TheBoundaryAt63AndAHalf) {
  // Just above 127 * 2^-3 needs e = -2, where amax / 2^e is just above 63.5
  // and so rounds to 64: the row's largest |q| is never below 64.
  const float above = std::nextafter(15.875f, 100.0f);
  expect_i8({{above}, -2, {64}});
  expect_i8({{127.5f}, 1, {64}});  // 63.75 -> 64
  expect_i8({{-127.5f, 1.0f}, 1, {-64, 0}});  // 0.5 -> 0 (even)
  // Half-way ties below 127 in one row: 2.5 -> 2, 3.5 -> 4, -2.5 -> -2, 0.5 -> 0, 1.5 -> 2.
  expect_i8({{127.0f, 2.5f, 3.5f, -2.5f, 0.5f, 1.5f}, 0, {127, 2, 4, -2, 0, 2}});
}

TEST(KvRoundingI8, ExponentIsClampedAtMinus128) {
  // 1e-38 would want e = -133; the signed exponent byte stops at -128, where
  // 1e-38 / 2^-128 = 3.4028... -> 3: the value 3 * 2^-128 (a subnormal, exact).
  expect_i8({{1e-38f}, -128, {3}});
  EXPECT_EQ(kr::i8_value_bits(3, -128), 0x00600000u);
  expect_i8({{std::ldexp(20.0f, -128)}, -128, {20}});  // below 64 is canonical only at the clamp
  expect_i8({{std::ldexp(1.0f, -130), -std::ldexp(1.0f, -149)}, -128, {0, 0}});  // flushed to +0
}

TEST(KvRoundingI8, ZeroRowsAndSignedZeros) {
  expect_i8({{0.0f, -0.0f, 0.0f}, -128, {0, 0, 0}});
  std::vector<float> row = {-0.0f, 5.0f};
  kr::round_i8_row(row.data(), 2);
  EXPECT_EQ(bits(row[0]), 0u);  // int8 has no -0
}

TEST(KvRoundingI8, LargeRowsAndNonFiniteRows) {
  expect_i8({{std::ldexp(127.0f, 121)}, 121, {127}});  // the largest exponent of a finite row
  // FLT_MAX needs e = 122, where it rounds to 64 * 2^122 = 2^128: infinity,
  // like bf16's rounding of it (finite-only scope).
  std::vector<float> row = {from_bits(0x7f7fffffu)};
  kr::round_i8_row(row.data(), 1);
  EXPECT_TRUE(std::isinf(row[0]));
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    std::vector<float> r = {1.0f, bad, 2.0f};
    kr::round_i8_row(r.data(), 3);
    for (float f : r) EXPECT_EQ(bits(f), kr::kCanonicalNan);
  }
}

// Independent reference: e by search, q by the double rounding of an exact quotient.
std::vector<float> reference_i8(const std::vector<float>& row) {
  double amax = 0;
  for (float f : row) amax = std::max(amax, std::fabs(double(f)));
  int e = -128;
  while (amax > 127.0 * std::ldexp(1.0, e)) ++e;
  std::vector<float> out(row.size());
  for (size_t i = 0; i < row.size(); ++i) {
    const double q = std::nearbyint(double(row[i]) / std::ldexp(1.0, e));
    EXPECT_LE(std::fabs(q), 127.0);
    out[i] = float(q * std::ldexp(1.0, e)) + 0.0f;  // + 0.0f: -0 -> +0
  }
  return out;
}

struct RandomRows {
  uint64_t state = 7;
  uint64_t next() { return state = state * 6364136223846793005ull + 1442695040888963407ull; }
  // Rows of mixed magnitudes, some with a scale near the subnormal range or far above 1.
  std::vector<float> row(int n) {
    const int scale = int(next() >> 58) - 32;  // 2^-32 .. 2^31
    const bool tiny = next() % 11 == 0;
    std::vector<float> r(static_cast<size_t>(n));
    for (float& f : r) {
      const double unit = double(int64_t(next() >> 40) - (int64_t(1) << 23)) / double(1 << 23);
      f = float(std::ldexp(unit, tiny ? scale - 100 : scale));
      if (next() % 17 == 0) f = 0.0f;
    }
    return r;
  }
};

TEST(KvRoundingI8, AgreesWithADoublePrecisionReference) {
  RandomRows rng;
  for (int n : {1, 2, 8, 64, 128}) {
    for (int k = 0; k < 2000; ++k) {
      const std::vector<float> row = rng.row(n);
      std::vector<float> rounded = row;
      kr::round_i8_row(rounded.data(), n);
      const std::vector<float> expected = reference_i8(row);
      for (int i = 0; i < n; ++i) ASSERT_EQ(bits(rounded[size_t(i)]), bits(expected[size_t(i)])) << "n " << n << " i " << i;
    }
  }
}

// Rounding twice changes nothing; the rounded rows encode, and decode back to
// the same bits; and an unrounded row is refused by the encoder.
TEST(KvRounding, IdempotentAndLosslessThroughTheCodec) {
  RandomRows rng;
  const struct {
    KvRowRounding rounding;
    uint32_t dtype;
  } storages[] = {{KvRowRounding::Bf16, kKvDtypeBf16}, {KvRowRounding::I8, kKvDtypeI8}};
  for (const auto& s : storages) {
    for (int head_dim : {1, 8, 64}) {
      const int n_rows = 50;
      std::vector<float> rows;
      for (int r = 0; r < n_rows; ++r) {
        const std::vector<float> one = rng.row(head_dim);
        rows.insert(rows.end(), one.begin(), one.end());
      }
      const std::vector<float> raw = rows;
      round_kv_rows(s.rounding, rows.data(), n_rows, head_dim);
      std::vector<float> twice = rows;
      round_kv_rows(s.rounding, twice.data(), n_rows, head_dim);
      ASSERT_EQ(0, std::memcmp(twice.data(), rows.data(), rows.size() * 4)) << kv_dtype_name(s.dtype);

      std::vector<uint8_t> bytes(size_t(n_rows) * kv_row_bytes(s.dtype, uint32_t(head_dim)));
      ASSERT_EQ(encode_kv_rows(s.dtype, uint32_t(head_dim), rows.data(), size_t(n_rows), bytes.data()), size_t(n_rows));
      for (int r = 0; r < n_rows; ++r)
        ASSERT_EQ(kv_row_problem(s.dtype, uint32_t(head_dim), bytes.data() + size_t(r) * kv_row_bytes(s.dtype, uint32_t(head_dim))),
                  std::nullopt);
      std::vector<float> back(rows.size());
      decode_kv_rows(s.dtype, uint32_t(head_dim), bytes.data(), size_t(n_rows), back.data());
      ASSERT_EQ(0, std::memcmp(back.data(), rows.data(), rows.size() * 4)) << kv_dtype_name(s.dtype);

      // The raw rows are (almost surely) not fixed points: the first that
      // differs from its rounding is the one the encoder names.
      size_t first_changed = size_t(n_rows);
      for (size_t i = 0; i < raw.size(); ++i)
        if (bits(raw[i]) != bits(rows[i])) {
          first_changed = i / size_t(head_dim);
          break;
        }
      EXPECT_EQ(encode_kv_rows(s.dtype, uint32_t(head_dim), raw.data(), size_t(n_rows), bytes.data()), first_changed);
    }
  }
}

TEST(KvRowCodec, SizesAndCanonicalRows) {
  EXPECT_EQ(kv_row_bytes(kKvDtypeF32, 64), 256u);
  EXPECT_EQ(kv_row_bytes(kKvDtypeBf16, 64), 128u);
  EXPECT_EQ(kv_row_bytes(kKvDtypeI8, 64), 65u);
  EXPECT_EQ(kv_row_bytes(3, 64), 0u);
  // i8: the zero row has exponent byte 0x80 (-128).
  const float zeros[3] = {0, 0, 0};
  uint8_t row[4];
  ASSERT_EQ(encode_kv_rows(kKvDtypeI8, 3, zeros, 1, row), 1u);
  EXPECT_EQ(row[0], 0x80);
  EXPECT_EQ(row[1] | row[2] | row[3], 0);
  const uint8_t ok[] = {0x00, 64, 0xff, 0};  // e = 0: 64, -1, 0
  EXPECT_EQ(kv_row_problem(kKvDtypeI8, 3, ok), std::nullopt);
  const uint8_t small_q[] = {0xfd, 63, 1, 0};   // largest |q| 63 with e = -3 > -128
  const uint8_t min_q[] = {0x00, 64, 0x80, 0};  // q = -128
  const uint8_t zero_e[] = {0x00, 0, 0, 0};     // a zero row must have e = -128
  const uint8_t big_e[] = {122, 64, 0, 0};      // 64 * 2^122 is not finite
  for (const uint8_t* bad : {small_q, min_q, zero_e, big_e})
    EXPECT_NE(kv_row_problem(kKvDtypeI8, 3, bad), std::nullopt) << int(bad[0]);
  const uint8_t clamped[] = {0x80, 5, 0, 0};  // below 64 is fine at the clamp
  EXPECT_EQ(kv_row_problem(kKvDtypeI8, 3, clamped), std::nullopt);
  // bf16: one NaN only.
  const uint8_t nan_ok[] = {0xc0, 0x7f}, inf[] = {0x80, 0xff}, nan_payload[] = {0xc1, 0x7f}, nan_neg[] = {0xc0, 0xff};
  EXPECT_EQ(kv_row_problem(kKvDtypeBf16, 1, nan_ok), std::nullopt);
  EXPECT_EQ(kv_row_problem(kKvDtypeBf16, 1, inf), std::nullopt);
  EXPECT_NE(kv_row_problem(kKvDtypeBf16, 1, nan_payload), std::nullopt);
  EXPECT_NE(kv_row_problem(kKvDtypeBf16, 1, nan_neg), std::nullopt);
  // i8 cannot hold a NaN: the encoder refuses the canonical-NaN row.
  const float nan_row[2] = {from_bits(kr::kCanonicalNan), from_bits(kr::kCanonicalNan)};
  EXPECT_EQ(encode_kv_rows(kKvDtypeI8, 2, nan_row, 1, row), 0u);
}

TEST(KvRowCodec, CheckerFindsARowCutAcrossPieces) {
  // 2 heads x 1 token x head_dim 3 rows: K(h0) K(h1) V(h0) V(h1); V h1 is bad.
  std::vector<uint8_t> payload = {0x80, 0, 0, 0, 0x00, 64, 0, 0, 0x80, 0, 0, 0, 0x00, 3, 0, 0};
  for (size_t piece : {1, 3, 5, 16}) {
    KvPayloadChecker checker(kKvDtypeI8, 2, 3, 1, 9);
    std::optional<std::string> problem;
    for (size_t at = 0; at < payload.size() && !problem; at += piece)
      problem = checker.feed(payload.data() + at, std::min(piece, payload.size() - at));
    ASSERT_TRUE(problem) << piece;
    EXPECT_EQ(problem->rfind("layer 0 V, token 9, head 1: ", 0), 0u) << *problem;
  }
}

}  // namespace
}  // namespace kvg
