// Artifact format v1: one contiguous, canonical, little-endian byte string
//   header (padded to 64 bytes) | payload (K,V per layer; f32, bf16 or i8 rows,
//   storage/kv_codec.hpp) | trailer (SHA-256)
// whose SHA-256 over all bytes is its identity. docs/artifact-format.md is the
// normative specification; this file is one implementation of it.
//
// Nothing read from an artifact may be trusted until ArtifactReader::finish()
// (or verify_artifact) has checked the trailer: header validation only proves
// the header is well-formed, not that it is the one that was written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "storage/artifact_header.hpp"
#include "storage/background_hasher.hpp"
#include "storage/byte_stream.hpp"
#include "storage/kv_codec.hpp"
#include "storage/sha256.hpp"

namespace kvg {

// Streams one artifact into a sink, hashing as it goes (no second copy, no
// second pass). The header is written by the constructor. After any exception
// (including one from the sink) the writer and what it wrote are unusable.
class ArtifactWriter {
 public:
  ArtifactWriter(const ArtifactHeader& header, ByteSink& sink);

  // Layer `layer` (must be the next one): K then V, each block_floats() floats
  // laid out [n_tokens][n_head_kv][head_dim], encoded in the header's kv_dtype.
  // Under a compact dtype every value must already be what that storage holds
  // (the KV cache rounds rows as it writes them): a row that is not is
  // refused (InvalidArgument, naming it), never rounded here.
  void write_layer(uint32_t layer, const float* K, const float* V);
  // Raw little-endian payload bytes, for copying an artifact through; may be
  // mixed with write_layer as long as write_layer starts on a layer boundary.
  // Non-canonical compact rows are refused (InvalidArgument).
  void write_payload(std::span<const uint8_t> bytes);
  uint64_t payload_written() const { return written_; }

  // Writes the trailer and returns the identity. Throws InvalidArgument if the
  // payload is incomplete.
  Digest finish();

 private:
  void emit(const uint8_t* data, size_t n);
  void emit_payload(const uint8_t* data, size_t n);  // emit, after the canonical-form check
  void write_block(const float* block);

  ByteSink& sink_;
  Sha256 sha_;
  uint32_t kv_dtype_, head_dim_;
  size_t row_bytes_;
  KvPayloadChecker canon_;
  uint64_t payload_bytes_;
  uint64_t layer_bytes_;
  uint64_t written_ = 0;
  bool finished_ = false;
};

// Streams one artifact out of a source, in bounded reads, hashing as it goes.
// Order: header(), then read_layer()/read_payload() in order, then finish().
// Truncation throws Corrupt "artifact truncated: expected N bytes, got M".
// After any exception the reader is unusable: discard it and everything read.
class ArtifactReader {
 public:
  static constexpr size_t kDefaultChunkBytes = size_t{4} << 20;

  // A VerifiedBytes source (storage/verified_bytes.hpp) is read without
  // hashing: its identity and trailer were checked when it was made.
  explicit ArtifactReader(ByteSource& src, size_t chunk_bytes = kDefaultChunkBytes);

  // Parses and validates the header on the first call.
  const ArtifactHeader& header();
  // Reads layer `layer` (must be the next one) into K and V (block_floats()
  // each), decoding the header's kv_dtype.
  void read_layer(uint32_t layer, float* K, float* V);
  // From here on, fp32 layers are hashed in place by a thread of their own
  // while the next bytes are read (storage/background_hasher.hpp): reading
  // and hashing overlap. The caller then leaves every K and V it passed
  // unchanged until finish() has returned or the reader is gone (a graft's
  // KV cache rows are). Nothing read counts before finish() either way.
  void overlap_hashing();
  // Reads up to out.size() raw payload bytes; returns fewer only at payload end.
  size_t read_payload(std::span<uint8_t> out);
  // Both check every compact row's canonical form as it is read (Corrupt,
  // naming the row): each KV has exactly one encoding, so one identity.
  uint64_t payload_remaining();

  // Hashes and discards any unread payload, reads the trailer, requires end of
  // data, verifies the trailer and returns the identity.
  Digest finish();
  // Wall seconds the caller's thread spent hashing, or waiting for the
  // hashing thread, and reading the source so far (a graft's verify and I/O
  // parts; the rest of a read is the copy into place). Hashing that
  // overlapped a read is in neither: overlapped_hash_seconds() has it all.
  double hash_seconds() const { return hash_s_; }
  double source_seconds() const { return source_s_; }
  double overlapped_hash_seconds() const { return hasher_ ? hasher_->busy_seconds() : 0.0; }

 private:
  // Exactly n bytes or Corrupt (truncated); `in_place`: hashed behind the
  // read when overlap_hashing() is on, the bytes staying where they are.
  void take(uint8_t* buf, size_t n, bool in_place = false);
  void hash_inline(const uint8_t* buf, size_t n);  // after what the hasher holds
  void take_payload(uint8_t* buf, size_t n, bool in_place = false);  // take, then the canonical-form check
  void read_block(float* block);
  [[noreturn]] void truncated(uint64_t got) const;

  ByteSource& src_;
  size_t chunk_bytes_;
  std::optional<Digest> vouched_;  // the identity of a VerifiedBytes source
  Sha256 sha_;
  std::optional<ArtifactHeader> header_;
  std::optional<KvPayloadChecker> canon_;
  std::vector<uint8_t> encoded_;  // a compact block's bytes on their way to floats
  uint64_t consumed_ = 0;   // bytes taken from src_
  uint64_t expected_ = 0;   // bytes known to be needed so far (total once the header is read)
  uint64_t payload_read_ = 0;
  bool finished_ = false;
  double hash_s_ = 0, source_s_ = 0;
  bool overlap_ = false;
  std::unique_ptr<BackgroundHasher> hasher_;  // last: joined before the rest goes
};

struct VerifiedArtifact {
  ArtifactHeader header;
  Digest identity;
};

// Reads a whole artifact (constant memory beyond the header), checks every rule
// and the trailer, and returns the header with the identity.
VerifiedArtifact verify_artifact(ByteSource& src);
VerifiedArtifact verify_artifact(std::span<const uint8_t> bytes);

// One JSON object describing the header and identity (for `kvg verify`).
std::string header_to_json(const ArtifactHeader& header, const Digest& identity);

}  // namespace kvg
