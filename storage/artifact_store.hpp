// Where artifacts live: a content-addressed store keyed by the SHA-256 of the
// bytes. Implementations: FileStore (storage/), the large-object store
// (extension/). Stores know bytes only; they do not parse artifacts.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "storage/byte_stream.hpp"
#include "storage/sha256.hpp"

namespace kvg {

class ArtifactStore {
 public:
  virtual ~ArtifactStore();

  // Stores everything `src` yields and returns its SHA-256. Idempotent:
  // identical content is stored once.
  virtual Digest put(ByteSource& src) = 0;
  // The bytes stored under `id`; NotFound if absent. The returned source checks
  // the SHA-256 while it is read and throws Corrupt at end of data on mismatch,
  // so a caller must read to the end (a read returning 0) before trusting it.
  virtual std::unique_ptr<ByteSource> get(const Digest& id) = 0;
  // The same bytes without that check, for a reader that verifies the
  // identity itself (ArtifactReader::finish() computes it; graft() and
  // verification compare it with `id`): the bytes are then hashed once.
  virtual std::unique_ptr<ByteSource> get_unverified(const Digest& id) = 0;
  virtual bool exists(const Digest& id) = 0;
  // Every stored identity, sorted.
  virtual std::vector<Digest> list() = 0;
};

// Wraps a source, hashes every byte that passes through and, when the inner
// source reports end of data, throws Corrupt unless the hash equals `expected`.
// The failure is sticky: later reads throw again rather than report a clean end.
class HashVerifyingSource final : public ByteSource {
 public:
  HashVerifyingSource(std::unique_ptr<ByteSource> inner, const Digest& expected,
                      std::string what = "stored object");
  // Non-owning: `inner` must outlive this object.
  HashVerifyingSource(ByteSource& inner, const Digest& expected, std::string what = "stored object");

  size_t read(uint8_t* buf, size_t n) override;
  uint64_t bytes_read() const { return count_; }

 private:
  std::unique_ptr<ByteSource> owned_;
  ByteSource& inner_;
  Digest expected_;
  std::string what_;
  Sha256 sha_;
  uint64_t count_ = 0;
  enum class State { Reading, Verified, Failed } state_ = State::Reading;
  std::string failure_;
};

}  // namespace kvg
