// storage/background_hasher.hpp: SHA-256 on a thread of its own, fed in
// order. The digest is the one-shot digest of the spans' concatenation
// whatever their sizes, a failure on the thread reaches drain(), and the
// destructor waits for what is still queued (the spans must outlive it).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/error.hpp"
#include "storage/background_hasher.hpp"

namespace kvg {
namespace {

std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = uint8_t(i * 131 + (i >> 9));
  return b;
}

TEST(BackgroundHasher, DigestIsTheOneShotDigestForAnySpans) {
  const std::vector<uint8_t> bytes = pattern(3 << 20);
  const Digest expected = sha256(std::span<const uint8_t>(bytes));
  for (size_t piece : {size_t(1), size_t(63), size_t(4096), size_t(1) << 20, bytes.size()}) {
    if (piece == 1 && bytes.size() > 100000) {  // a million one-byte spans: keep it to a prefix
      const std::span<const uint8_t> prefix(bytes.data(), 100000);
      Sha256 sha;
      {
        BackgroundHasher hasher(sha);
        for (size_t i = 0; i < prefix.size(); ++i) hasher.submit(prefix.data() + i, 1);
        hasher.drain();
      }
      EXPECT_EQ(sha.finish(), sha256(prefix));
      continue;
    }
    Sha256 sha;
    BackgroundHasher hasher(sha);
    for (size_t at = 0; at < bytes.size(); at += piece) hasher.submit(bytes.data() + at, std::min(piece, bytes.size() - at));
    hasher.submit(bytes.data(), 0);  // nothing
    hasher.drain();
    EXPECT_EQ(Sha256(sha).finish(), expected) << "spans of " << piece;
    EXPECT_GT(hasher.busy_seconds(), 0.0);
  }
}

TEST(BackgroundHasher, TheDestructorWaitsForQueuedSpans) {
  const std::vector<uint8_t> bytes = pattern(8 << 20);
  Sha256 sha;
  {
    BackgroundHasher hasher(sha);
    for (size_t at = 0; at < bytes.size(); at += 1 << 20) hasher.submit(bytes.data() + at, 1 << 20);
  }  // no drain(): the destructor finishes the queue before the thread goes
  EXPECT_EQ(sha.finish(), sha256(std::span<const uint8_t>(bytes)));
}

TEST(BackgroundHasher, AFailureOnTheThreadReachesDrain) {
  const std::vector<uint8_t> bytes = pattern(100);
  Sha256 sha;
  sha.finish();  // updates now throw Internal
  BackgroundHasher hasher(sha);
  hasher.submit(bytes.data(), bytes.size());
  try {
    hasher.drain();
    ADD_FAILURE() << "the failed update went unreported";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Internal) << e.what();
  }
  hasher.drain();  // reported once; the hasher is still usable to its end
}

}  // namespace
}  // namespace kvg
