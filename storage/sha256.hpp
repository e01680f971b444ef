// SHA-256 through OpenSSL EVP: the identity of every artifact and the
// integrity check of every store read.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX, kept out of every includer

namespace kvg {

using Digest = std::array<uint8_t, 32>;

// Streaming hasher. Copyable: a copy continues from the same running state,
// which lets the artifact writer take the trailer hash and keep hashing for
// the identity without a second pass over the bytes.
class Sha256 {
 public:
  Sha256();
  Sha256(const Sha256& other);
  Sha256& operator=(const Sha256& other);
  Sha256(Sha256&& other) noexcept;
  Sha256& operator=(Sha256&& other) noexcept;
  ~Sha256();

  void update(std::span<const uint8_t> bytes);
  void update(const void* data, size_t n);
  // Ends the hash. Further update()/finish() throw Internal until reset().
  Digest finish();
  // Starts a fresh hash in the same object.
  void reset();

 private:
  evp_md_ctx_st* ctx_ = nullptr;
  bool finished_ = false;
};

Digest sha256(std::span<const uint8_t> bytes);
Digest sha256(std::string_view text);

// Lowercase, 64 characters.
std::string to_hex(const Digest& digest);
// Lowercase hex of any bytes (two characters per byte).
std::string to_hex(std::string_view bytes);
// Exactly 64 hex characters (either case); anything else is nullopt.
std::optional<Digest> digest_from_hex(std::string_view hex);

bool is_zero(const Digest& digest);

}  // namespace kvg
