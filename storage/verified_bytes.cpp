#include "storage/verified_bytes.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "storage/background_hasher.hpp"

namespace kvg {

namespace {

constexpr size_t kDigestBytes = sizeof(Digest);

// `sha` has hashed the bytes before the trailer.
bool trailer_and_identity_match(Sha256& sha, const std::vector<uint8_t>& bytes, const Digest& expected) {
  const size_t body = bytes.size() - kDigestBytes;
  const Digest trailer_expected = Sha256(sha).finish();
  if (std::memcmp(trailer_expected.data(), bytes.data() + body, kDigestBytes) != 0) return false;
  sha.update(bytes.data() + body, kDigestBytes);
  return sha.finish() == expected;
}

}  // namespace

std::optional<VerifiedBytes> VerifiedBytes::check(Bytes bytes, const Digest& expected) {
  if (!bytes || bytes->size() < kDigestBytes) return std::nullopt;
  Sha256 sha;
  sha.update(bytes->data(), bytes->size() - kDigestBytes);
  if (!trailer_and_identity_match(sha, *bytes, expected)) return std::nullopt;
  return VerifiedBytes(std::move(bytes), expected);
}

std::optional<VerifiedBytes> VerifiedBytes::read_checked(ByteSource& src, uint64_t size, const Digest& expected,
                                                         size_t chunk_bytes) {
  if (size < kDigestBytes || size > SIZE_MAX) return std::nullopt;
  auto bytes = std::make_shared<std::vector<uint8_t>>(size_t(size));
  const size_t body = bytes->size() - kDigestBytes;
  const size_t chunk = std::max<size_t>(chunk_bytes, 1);
  Sha256 sha;
  {
    // Declared after `bytes`: on every way out it has finished with them.
    BackgroundHasher hasher(sha);
    size_t got = 0;
    while (got < bytes->size()) {
      const size_t r = src.read(bytes->data() + got, std::min(bytes->size() - got, chunk));
      if (r == 0) return std::nullopt;  // shorter than `size`
      if (got < body) hasher.submit(bytes->data() + got, std::min(r, body - got));
      got += r;
    }
    uint8_t extra;
    if (src.read(&extra, 1) != 0) return std::nullopt;  // longer
    hasher.drain();
  }
  if (!trailer_and_identity_match(sha, *bytes, expected)) return std::nullopt;
  return VerifiedBytes(std::move(bytes), expected);
}

size_t VerifiedBytes::read(uint8_t* buf, size_t n) {
  const size_t r = std::min(n, bytes_->size() - pos_);
  std::memcpy(buf, bytes_->data() + pos_, r);
  pos_ += r;
  return r;
}

}  // namespace kvg
