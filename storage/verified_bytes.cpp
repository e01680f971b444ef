#include "storage/verified_bytes.hpp"

#include <algorithm>
#include <cstring>

namespace kvg {

namespace {
constexpr size_t kDigestBytes = sizeof(Digest);
}  // namespace

std::optional<VerifiedBytes> VerifiedBytes::check(Bytes bytes, const Digest& expected) {
  if (!bytes || bytes->size() < kDigestBytes) return std::nullopt;
  const size_t body = bytes->size() - kDigestBytes;
  Sha256 sha;
  sha.update(bytes->data(), body);
  const Digest trailer_expected = Sha256(sha).finish();
  if (std::memcmp(trailer_expected.data(), bytes->data() + body, kDigestBytes) != 0) return std::nullopt;
  sha.update(bytes->data() + body, kDigestBytes);
  if (sha.finish() != expected) return std::nullopt;
  return VerifiedBytes(std::move(bytes), expected);
}

size_t VerifiedBytes::read(uint8_t* buf, size_t n) {
  const size_t r = std::min(n, bytes_->size() - pos_);
  std::memcpy(buf, bytes_->data() + pos_, r);
  pos_ += r;
  return r;
}

}  // namespace kvg
