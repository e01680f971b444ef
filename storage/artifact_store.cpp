#include "storage/artifact_store.hpp"

#include "common/error.hpp"

namespace kvg {

ArtifactStore::~ArtifactStore() = default;

HashVerifyingSource::HashVerifyingSource(std::unique_ptr<ByteSource> inner, const Digest& expected, std::string what)
    : owned_(std::move(inner)), inner_(*owned_), expected_(expected), what_(std::move(what)) {}

HashVerifyingSource::HashVerifyingSource(ByteSource& inner, const Digest& expected, std::string what)
    : inner_(inner), expected_(expected), what_(std::move(what)) {}

size_t HashVerifyingSource::read(uint8_t* buf, size_t n) {
  if (state_ == State::Failed) throw Error(ErrorCode::Corrupt, failure_);
  if (state_ == State::Verified || n == 0) return 0;
  size_t r = inner_.read(buf, n);
  if (r > 0) {
    sha_.update(buf, r);
    count_ += r;
    return r;
  }
  Digest actual = sha_.finish();
  if (actual != expected_) {
    state_ = State::Failed;
    failure_ = what_ + " " + to_hex(expected_) + " failed verification: its " + std::to_string(count_) +
               " bytes hash to " + to_hex(actual) + " (damaged or truncated)";
    throw Error(ErrorCode::Corrupt, failure_);
  }
  state_ = State::Verified;
  return 0;
}

}  // namespace kvg
