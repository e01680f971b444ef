// An artifact's header: its fields, the rules a valid one keeps, and its
// canonical bytes (docs/artifact-format.md, sections 2 and 3). The memory
// parser (parse_header) and the streaming one (ArtifactReader) share
// detail::parse_header_from, so both apply the same rules in the same order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "storage/kv_codec.hpp"
#include "storage/sha256.hpp"

namespace kvg {

inline constexpr char kArtifactMagic[4] = {'K', 'V', 'G', 'A'};
inline constexpr uint32_t kArtifactVersion = 1;
inline constexpr uint32_t kFlagHasParent = 1u << 0;
inline constexpr size_t kHeaderAlign = 64;
inline constexpr size_t kTrailerBytes = 32;
// Bytes before the recipe string: magic..recipe_len.
inline constexpr size_t kHeaderFixedPrefix = 84;
// Bytes between the recipe string and the token ids: kv_dtype..chain_tokens_sha256.
inline constexpr size_t kHeaderFixedMiddle = 56;

inline constexpr size_t kMaxRecipeBytes = 64;
inline constexpr uint32_t kMaxLayers = 1024;
inline constexpr uint32_t kMaxHeadsKv = 1024;
inline constexpr uint32_t kMaxHeadDim = 4096;
inline constexpr uint64_t kMaxPositionEnd = uint64_t{1} << 31;  // position_start + n_tokens
// Largest total artifact size a reader accepts (keeps every size in int64).
inline constexpr uint64_t kMaxArtifactBytes = uint64_t{1} << 62;

struct ArtifactHeader {
  uint32_t version = kArtifactVersion;
  Digest model_fingerprint{};
  std::optional<Digest> parent;  // the artifact this one continues (a chain link)
  std::string recipe;            // e.g. "f32-portable-v1"
  uint32_t kv_dtype = kKvDtypeF32;
  uint32_t n_layer = 0;
  uint32_t n_head_kv = 0;
  uint32_t head_dim = 0;
  uint32_t position_start = 0;   // absolute position of tokens[0]; the parent's end
  Digest chain_tokens_sha256{};  // hash_token_ids of positions 0..position_end()-1
  std::vector<uint32_t> tokens;  // the n_tokens ids stored here

  uint32_t n_tokens() const { return static_cast<uint32_t>(tokens.size()); }
  uint64_t position_end() const { return uint64_t{position_start} + tokens.size(); }
  size_t row_floats() const { return size_t{n_head_kv} * head_dim; }  // one token, one layer, K or V
  size_t block_floats() const { return tokens.size() * row_floats(); }  // one K or V block, decoded
  // Encoded sizes: one KV head's row of one token, one K or V block, one layer.
  size_t head_row_bytes() const { return size_t(kv_row_bytes(kv_dtype, head_dim)); }
  size_t block_bytes() const { return tokens.size() * n_head_kv * head_row_bytes(); }
  size_t layer_bytes() const { return 2 * block_bytes(); }
  // Sizes are meaningful for headers that pass validate_header (which bounds
  // them well inside size_t on 64-bit hosts).
  size_t header_bytes() const;  // padded to kHeaderAlign
  size_t payload_bytes() const { return size_t{n_layer} * layer_bytes(); }
  size_t total_bytes() const { return header_bytes() + payload_bytes() + kTrailerBytes; }
};

// Throws Corrupt (or Unsupported for an unknown version / kv_dtype) when the
// header breaks a rule of the specification.
void validate_header(const ArtifactHeader& header);

// Canonical header bytes, padding included. Throws InvalidArgument (Unsupported
// for version/dtype) if the header is invalid: we never write what we would reject.
std::vector<uint8_t> encode_header(const ArtifactHeader& header);

// Parses and validates the header at the front of `bytes` (which may hold the
// whole artifact). Does not check the trailer.
ArtifactHeader parse_header(std::span<const uint8_t> bytes);

// chain_tokens_sha256: SHA-256 of the token ids as consecutive u32 little-endian.
Digest hash_token_ids(std::span<const uint32_t> tokens);

// The same hash fed incrementally (e.g. parent chain tokens, then new ones).
class TokenHasher {
 public:
  void update(std::span<const uint32_t> tokens);
  Digest finish() { return sha_.finish(); }

 private:
  Sha256 sha_;
};

}  // namespace kvg

namespace kvg::detail {

// The first bytes of an artifact, fetched on demand.
class HeaderBytes {
 public:
  virtual ~HeaderBytes() = default;
  // Pointer to the first n bytes (valid until the next call); throws Corrupt
  // "artifact truncated" if fewer exist.
  virtual const uint8_t* need(size_t n) = 0;
  // Called as soon as the header fixes the total artifact size, so a later
  // truncation can be reported against it.
  virtual void expect_total(uint64_t /*total_bytes*/) {}
};

ArtifactHeader parse_header_from(HeaderBytes& in);

[[noreturn]] void throw_truncated(uint64_t expected, uint64_t got);

}  // namespace kvg::detail
