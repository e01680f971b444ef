// VerifiedBytes (storage/verified_bytes.hpp): what the extension's
// verified-artifact cache holds. Only bytes that hash to the name and end in
// a correct trailer are vouched for, and an ArtifactReader over them returns
// the same header, payload and identity as over the plain bytes, without
// hashing them again.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "storage/artifact_format.hpp"
#include "storage/verified_bytes.hpp"

namespace kvg {
namespace {

struct Written {
  VerifiedBytes::Bytes bytes;
  Digest identity;
};

Written small_artifact() {
  ArtifactHeader h;
  h.model_fingerprint = sha256(std::string_view("verified bytes test"));
  h.recipe = "f32-portable-v1";
  h.n_layer = 2;
  h.n_head_kv = 1;
  h.head_dim = 4;
  h.tokens = {3, 1, 4};
  h.chain_tokens_sha256 = hash_token_ids(h.tokens);
  MemorySink sink;
  ArtifactWriter w(h, sink);
  std::vector<float> K(h.block_floats()), V(h.block_floats());
  for (uint32_t l = 0; l < h.n_layer; ++l) {
    for (size_t i = 0; i < K.size(); ++i) K[i] = float(l * 100 + i), V[i] = -float(l * 100 + i);
    w.write_layer(l, K.data(), V.data());
  }
  const Digest id = w.finish();
  return {std::make_shared<std::vector<uint8_t>>(sink.bytes()), id};
}

struct ReadBack {
  std::vector<float> payload;
  Digest identity;
  double hash_seconds;
};

ReadBack read_back(ByteSource& src) {
  ArtifactReader r(src);
  const ArtifactHeader h = r.header();
  ReadBack out;
  std::vector<float> K(h.block_floats()), V(h.block_floats());
  for (uint32_t l = 0; l < h.n_layer; ++l) {
    r.read_layer(l, K.data(), V.data());
    out.payload.insert(out.payload.end(), K.begin(), K.end());
    out.payload.insert(out.payload.end(), V.begin(), V.end());
  }
  out.identity = r.finish();
  out.hash_seconds = r.hash_seconds();
  return out;
}

TEST(VerifiedBytes, VouchesOnlyForBytesThatHashToTheirName) {
  const Written a = small_artifact();
  EXPECT_TRUE(VerifiedBytes::check(a.bytes, a.identity).has_value());
  Digest other = a.identity;
  other[0] ^= 1;
  EXPECT_FALSE(VerifiedBytes::check(a.bytes, other).has_value()) << "another name";
  EXPECT_FALSE(VerifiedBytes::check(nullptr, a.identity).has_value());
  EXPECT_FALSE(VerifiedBytes::check(std::make_shared<std::vector<uint8_t>>(10), a.identity).has_value());
}

TEST(VerifiedBytes, RefusesABadTrailerEvenUnderTheHashOfItsBytes) {
  const Written a = small_artifact();
  auto damaged = std::make_shared<std::vector<uint8_t>>(*a.bytes);
  damaged->back() ^= 0x80;  // the trailer no longer hashes the bytes before it
  const Digest name = sha256(std::span<const uint8_t>(*damaged));
  EXPECT_FALSE(VerifiedBytes::check(damaged, name).has_value());
}

TEST(VerifiedBytes, ReadsAsThePlainBytesWithoutHashingThem) {
  const Written a = small_artifact();
  MemorySource plain(*a.bytes);
  const ReadBack expected = read_back(plain);
  auto verified = VerifiedBytes::check(a.bytes, a.identity);
  ASSERT_TRUE(verified.has_value());
  const ReadBack got = read_back(*verified);
  EXPECT_EQ(got.payload, expected.payload);
  EXPECT_EQ(got.identity, a.identity);
  EXPECT_EQ(got.hash_seconds, 0.0) << "verified bytes are not hashed again";
  VerifiedBytes again = VerifiedBytes::vouched(a.bytes, a.identity);
  EXPECT_EQ(read_back(again).payload, expected.payload) << "a second reader of the same cached bytes";
}

// A cache miss reads the large object once, hashing behind the reads: the
// same vouching as check(), and nothing for a source of another length.
TEST(VerifiedBytes, ReadCheckedVouchesExactlyAsCheckDoes) {
  const Written a = small_artifact();
  for (size_t chunk : {size_t(1), size_t(7), size_t(64), size_t(1) << 22}) {
    MemorySource src(*a.bytes);
    auto got = VerifiedBytes::read_checked(src, a.bytes->size(), a.identity, chunk);
    ASSERT_TRUE(got.has_value()) << "chunks of " << chunk;
    EXPECT_EQ(*got->bytes(), *a.bytes);
    EXPECT_EQ(read_back(*got).identity, a.identity);
  }
  Digest other = a.identity;
  other[5] ^= 4;
  MemorySource src(*a.bytes);
  EXPECT_FALSE(VerifiedBytes::read_checked(src, a.bytes->size(), other, 64).has_value()) << "another name";
  auto damaged = std::make_shared<std::vector<uint8_t>>(*a.bytes);
  damaged->back() ^= 0x80;
  MemorySource bad(*damaged);
  EXPECT_FALSE(VerifiedBytes::read_checked(bad, damaged->size(), sha256(std::span<const uint8_t>(*damaged)), 64))
      << "a bad trailer under the hash of its bytes";
  const std::vector<uint8_t> shorter(a.bytes->begin(), a.bytes->end() - 1);
  MemorySource short_src(shorter);
  EXPECT_FALSE(VerifiedBytes::read_checked(short_src, a.bytes->size(), a.identity, 64)) << "shorter than its row";
  std::vector<uint8_t> longer = *a.bytes;
  longer.push_back(0);
  MemorySource long_src(longer);
  EXPECT_FALSE(VerifiedBytes::read_checked(long_src, a.bytes->size(), a.identity, 64)) << "longer than its row";
  MemorySource tiny(*a.bytes);
  EXPECT_FALSE(VerifiedBytes::read_checked(tiny, 10, a.identity, 64)) << "smaller than a trailer";
}

}  // namespace
}  // namespace kvg
