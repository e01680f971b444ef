// An artifact held in memory whose bytes were checked in full once: their
// SHA-256 is the artifact's identity and their trailer is the hash of the
// bytes before it. ArtifactReader reads such a source without hashing it
// again (the verified-artifact cache of the extension, docs/artifact-lifecycle.md);
// every format rule of the header and layout is still checked on each read.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "storage/byte_stream.hpp"
#include "storage/sha256.hpp"

namespace kvg {

class VerifiedBytes final : public ByteSource {
 public:
  using Bytes = std::shared_ptr<const std::vector<uint8_t>>;

  // The bytes with their identity when they hash to `expected` and end in a
  // trailer that is the hash of the bytes before it; nullopt otherwise (the
  // caller then reads them the ordinary way, which reports what is wrong).
  static std::optional<VerifiedBytes> check(Bytes bytes, const Digest& expected);
  // The same check over exactly `size` bytes read from `src` in reads of
  // `chunk_bytes`, hashed behind the reads (storage/background_hasher.hpp):
  // what a cache miss costs is the read or the hash, not both. A source of
  // another length gives nullopt too.
  static std::optional<VerifiedBytes> read_checked(ByteSource& src, uint64_t size, const Digest& expected,
                                                   size_t chunk_bytes);
  // Bytes a previous check() established (a cache entry). Not re-checked.
  static VerifiedBytes vouched(Bytes bytes, const Digest& identity) { return VerifiedBytes(std::move(bytes), identity); }

  size_t read(uint8_t* buf, size_t n) override;
  const Digest& identity() const { return identity_; }
  const Bytes& bytes() const { return bytes_; }

 private:
  VerifiedBytes(Bytes bytes, const Digest& identity) : bytes_(std::move(bytes)), identity_(identity) {}

  Bytes bytes_;
  Digest identity_;
  size_t pos_ = 0;
};

}  // namespace kvg
