// engine/zeroed_floats.hpp: the KV cache's row buffers. Growth keeps what was
// there and the fresh part reads zero, across every way it grows (heap to
// mapping, mapping moved by mremap) and through copies and moves.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "engine/kv_cache.hpp"
#include "engine/zeroed_floats.hpp"

namespace kvg {
namespace {

void fill(ZeroedFloats& b, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i) b.data()[i] = float(i) + 0.5f;
}

// [0, filled) holds fill()'s values and [filled, size()) reads +0.0f, bit for bit.
void expect_contents(const ZeroedFloats& b, size_t filled) {
  for (size_t i = 0; i < b.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, b.data() + i, 4);
    if (i < filled) {
      ASSERT_EQ(b.data()[i], float(i) + 0.5f) << "index " << i;
    } else {
      ASSERT_EQ(bits, 0u) << "index " << i << " of a fresh part";
    }
  }
}

TEST(ZeroedFloats, GrowsKeepingValuesAndZeroingTheRest) {
  ZeroedFloats b;
  EXPECT_EQ(b.size(), 0u);
  // 1 KiB (heap), 512 KiB (heap), 4 MiB (mapping), 12 MiB (mapping moved), 40 MiB.
  size_t filled = 0;
  for (size_t n : {size_t(256), size_t(128) << 10, size_t(1) << 20, size_t(3) << 20, size_t(10) << 20}) {
    b.grow(n);
    ASSERT_EQ(b.size(), n);
    expect_contents(b, filled);
    fill(b, filled, n / 2);  // half filled: the next growth keeps a fresh tail too
    filled = n / 2;
  }
  b.grow(16);  // never shrinks
  EXPECT_EQ(b.size(), size_t(10) << 20);
  expect_contents(b, filled);
}

TEST(ZeroedFloats, CopiesAreDeepAndMovesEmptyTheSource) {
  for (size_t n : {size_t(1000), size_t(2) << 20}) {  // heap and mapping
    ZeroedFloats a;
    a.grow(n);
    fill(a, 0, n / 3);
    ZeroedFloats copy = a;
    ASSERT_NE(copy.data(), a.data());
    expect_contents(copy, n / 3);
    copy.data()[0] = -1.0f;
    EXPECT_EQ(a.data()[0], 0.5f);
    ZeroedFloats moved = std::move(a);
    EXPECT_EQ(a.size(), 0u);
    EXPECT_EQ(a.data(), nullptr);
    expect_contents(moved, n / 3);
    copy = moved;
    expect_contents(copy, n / 3);
  }
}

TEST(ZeroedFloats, KvCacheRowsBeyondTheFilledOnesReadZeroAfterGrowth) {
  KvCache kv(2, 64, 1 << 16);
  kv.reserve(10);
  for (int l = 0; l < 2; ++l)
    for (int64_t p = 0; p < 10; ++p)
      for (int i = 0; i < 64; ++i) kv.k(l, p)[i] = kv.v(l, p)[i] = float(l * 1000 + p) + float(i) / 64;
  kv.reserve(20000);  // heap to mapping
  kv.reserve(60000);  // mapping moved
  for (int l = 0; l < 2; ++l) {
    for (int64_t p = 0; p < 10; ++p)
      for (int i = 0; i < 64; ++i) {
        ASSERT_EQ(kv.k(l, p)[i], float(l * 1000 + p) + float(i) / 64);
        ASSERT_EQ(kv.v(l, p)[i], float(l * 1000 + p) + float(i) / 64);
      }
    for (int64_t p : {int64_t(10), int64_t(19999), int64_t(59999)})
      for (int i = 0; i < 64; ++i) ASSERT_EQ(kv.k(l, p)[i], 0.0f) << "layer " << l << " position " << p;
  }
}

}  // namespace
}  // namespace kvg
