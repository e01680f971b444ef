// SHA-256 against the NIST FIPS 180-2 example vectors, plus the hex helpers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.hpp"
#include "storage/sha256.hpp"

namespace kvg {
namespace {

std::string hex_of(std::string_view text) { return to_hex(sha256(text)); }

TEST(Sha256, NistEmpty) {
  EXPECT_EQ(hex_of(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, NistAbc) {
  EXPECT_EQ(hex_of("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, Nist448Bit) {
  EXPECT_EQ(hex_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, Nist896Bit) {
  EXPECT_EQ(hex_of("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
                   "mnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256, MillionAStreamedInOddChunks) {
  const std::string as(1000, 'a');
  Sha256 h;
  size_t left = 1000000, step = 1;
  // Chunk sizes cycle through primes so block boundaries land everywhere.
  const size_t sizes[] = {1, 3, 7, 63, 64, 65, 127, 509, 997};
  while (left > 0) {
    size_t n = std::min({sizes[step++ % std::size(sizes)], left, as.size()});
    h.update(as.data(), n);
    left -= n;
  }
  EXPECT_EQ(to_hex(h.finish()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, CopyContinuesFromTheSameState) {
  Sha256 a;
  a.update("ab", 2);
  Sha256 b(a);
  a.update("c", 1);
  b.update("c", 1);
  EXPECT_EQ(a.finish(), b.finish());
  Sha256 c;
  c = b;  // finished state copies too
  EXPECT_THROW(c.update("x", 1), Error);
}

TEST(Sha256, FinishTwiceThrowsAndResetRestarts) {
  Sha256 h;
  h.update("abc", 3);
  Digest d = h.finish();
  EXPECT_THROW(h.finish(), Error);
  h.reset();
  h.update("abc", 3);
  EXPECT_EQ(h.finish(), d);
}

TEST(Sha256, HexRoundTrip) {
  Digest d = sha256(std::string_view("abc"));
  std::string hex = to_hex(d);
  EXPECT_EQ(hex.size(), 64u);
  EXPECT_EQ(digest_from_hex(hex), d);
  std::string upper = hex;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(digest_from_hex(upper), d);
}

TEST(Sha256, HexRejectsWrongLengthAndNonHex) {
  std::string hex = to_hex(sha256(std::string_view("abc")));
  EXPECT_FALSE(digest_from_hex(hex.substr(0, 63)));
  EXPECT_FALSE(digest_from_hex(hex + "0"));
  EXPECT_FALSE(digest_from_hex(""));
  std::string bad = hex;
  bad[10] = 'g';
  EXPECT_FALSE(digest_from_hex(bad));
  bad[10] = ' ';
  EXPECT_FALSE(digest_from_hex(bad));
}

TEST(Sha256, IsZero) {
  EXPECT_TRUE(is_zero(Digest{}));
  EXPECT_FALSE(is_zero(sha256(std::string_view(""))));
}

}  // namespace
}  // namespace kvg
