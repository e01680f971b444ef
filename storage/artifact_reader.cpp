#include <algorithm>
#include <chrono>
#include <vector>

#include "common/error.hpp"
#include "storage/artifact_format.hpp"
#include "storage/artifact_header.hpp"
#include "storage/little_endian.hpp"
#include "storage/verified_bytes.hpp"

namespace kvg {

namespace {

// Reads the header from the stream into a growing buffer, hashing as it goes.
// It grows only as bytes actually arrive, so a forged n_tokens in a short
// input cannot make us allocate gigabytes.
class StreamHeaderBytes final : public detail::HeaderBytes {
 public:
  StreamHeaderBytes(ByteSource& src, Sha256& sha, size_t chunk) : src_(src), sha_(sha), chunk_(chunk) {}

  const uint8_t* need(size_t n) override {
    while (buf_.size() < n) {
      size_t old = buf_.size();
      size_t want = std::min(n - old, chunk_);
      buf_.resize(old + want);
      size_t got = read_fully(src_, buf_.data() + old, want);
      sha_.update(buf_.data() + old, got);
      buf_.resize(old + got);
      if (got < want) detail::throw_truncated(std::max<uint64_t>(n, total_), buf_.size());
    }
    return buf_.data();
  }
  void expect_total(uint64_t total) override { total_ = total; }
  size_t consumed() const { return buf_.size(); }

 private:
  ByteSource& src_;
  Sha256& sha_;
  size_t chunk_;
  std::vector<uint8_t> buf_;
  uint64_t total_ = 0;
};

}  // namespace

ArtifactReader::ArtifactReader(ByteSource& src, size_t chunk_bytes)
    : src_(src), chunk_bytes_(std::max<size_t>(chunk_bytes, 64)) {
  if (const auto* verified = dynamic_cast<const VerifiedBytes*>(&src)) vouched_ = verified->identity();
}

const ArtifactHeader& ArtifactReader::header() {
  if (!header_) {
    StreamHeaderBytes in(src_, sha_, chunk_bytes_);
    header_ = detail::parse_header_from(in);
    consumed_ = in.consumed();  // exactly header_bytes: the parser asks for no more
    expected_ = header_->total_bytes();
    canon_.emplace(header_->kv_dtype, header_->n_head_kv, header_->head_dim, header_->n_tokens(),
                   header_->position_start);
  }
  return *header_;
}

void ArtifactReader::truncated(uint64_t got) const { detail::throw_truncated(expected_, got); }

void ArtifactReader::overlap_hashing() { overlap_ = true; }

void ArtifactReader::hash_inline(const uint8_t* buf, size_t n) {
  const auto t0 = std::chrono::steady_clock::now();
  if (hasher_) hasher_->drain();  // sha_ is the hasher's until it has caught up
  sha_.update(buf, n);
  hash_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void ArtifactReader::take(uint8_t* buf, size_t n, bool in_place) {
  using Clock = std::chrono::steady_clock;
  // A thread pays only for a payload of several chunks: one chunk hashed
  // while the next is read.
  if (in_place && overlap_ && !vouched_ && !hasher_ && header_ && header_->payload_bytes() >= 2 * chunk_bytes_)
    hasher_ = std::make_unique<BackgroundHasher>(sha_);
  while (n > 0) {
    const Clock::time_point t0 = Clock::now();
    size_t r = src_.read(buf, std::min(n, chunk_bytes_));
    if (r == 0) truncated(consumed_);
    const Clock::time_point t1 = Clock::now();
    if (!vouched_) {
      if (in_place && hasher_)
        hasher_->submit(buf, r);
      else
        hash_inline(buf, r);
    }
    source_s_ += std::chrono::duration<double>(t1 - t0).count();
    consumed_ += r;
    buf += r;
    n -= r;
  }
}

uint64_t ArtifactReader::payload_remaining() { return header().payload_bytes() - payload_read_; }

void ArtifactReader::read_layer(uint32_t layer, float* K, float* V) {
  const ArtifactHeader& h = header();
  if (finished_) throw Error(ErrorCode::Internal, "ArtifactReader::read_layer after finish");
  const uint64_t layer_bytes = h.layer_bytes();
  if (payload_read_ % layer_bytes != 0 || payload_read_ / layer_bytes != layer || layer >= h.n_layer)
    throw Error(ErrorCode::InvalidArgument, "ArtifactReader::read_layer(" + std::to_string(layer) +
                                                ") out of order: " + std::to_string(payload_read_) + " of " +
                                                std::to_string(h.payload_bytes()) + " payload bytes read");
  for (float* block : {K, V}) read_block(block);
}

void ArtifactReader::read_block(float* block) {
  const ArtifactHeader& h = *header_;
  const size_t block_bytes = h.block_bytes();
  if (h.kv_dtype == kKvDtypeF32) {  // the bytes are the floats: straight into place
    // (in place for the hasher unless a byte swap is about to change them)
    take_payload(reinterpret_cast<uint8_t*>(block), block_bytes, kHostLittleEndian);
    if constexpr (!kHostLittleEndian) byteswap_words(block, h.block_floats());
    return;
  }
  // A compact block goes through a bounded buffer, a chunk of whole rows at a time.
  const size_t row_bytes = h.head_row_bytes(), per_piece = std::max<size_t>(1, chunk_bytes_ / row_bytes);
  const size_t rows = block_bytes / row_bytes;
  encoded_.resize(std::min(rows, per_piece) * row_bytes);
  for (size_t r = 0; r < rows; r += per_piece) {
    const size_t n = std::min(per_piece, rows - r);
    take_payload(encoded_.data(), n * row_bytes);
    decode_kv_rows(h.kv_dtype, h.head_dim, encoded_.data(), n, block + r * h.head_dim);
  }
}

size_t ArtifactReader::read_payload(std::span<uint8_t> out) {
  if (finished_) throw Error(ErrorCode::Internal, "ArtifactReader::read_payload after finish");
  size_t n = static_cast<size_t>(std::min<uint64_t>(out.size(), payload_remaining()));
  take_payload(out.data(), n);
  return n;
}

void ArtifactReader::take_payload(uint8_t* buf, size_t n, bool in_place) {
  take(buf, n, in_place);
  if (auto problem = canon_->feed(buf, n)) throw Error(ErrorCode::Corrupt, "artifact has a non-canonical KV row, " + *problem);
  payload_read_ += n;
}

Digest ArtifactReader::finish() {
  if (finished_) throw Error(ErrorCode::Internal, "ArtifactReader::finish called twice");
  header();
  if (payload_remaining() > 0) {
    std::vector<uint8_t> scratch(static_cast<size_t>(std::min<uint64_t>(payload_remaining(), chunk_bytes_)));
    while (payload_remaining() > 0) read_payload(scratch);
  }
  if (hasher_) {
    const auto t0 = std::chrono::steady_clock::now();
    hasher_->drain();
    hash_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  Digest expected = vouched_ ? Digest{} : Sha256(sha_).finish();
  Digest trailer;
  take(trailer.data(), trailer.size());
  // Verified bytes: the trailer and identity were checked over these bytes.
  Digest identity = vouched_ ? *vouched_ : sha_.finish();
  if (!vouched_ && trailer != expected)
    throw Error(ErrorCode::Corrupt, "artifact trailer hash mismatch (damaged or truncated)");
  // Also drives a hash-verifying store source to its end-of-data check.
  uint8_t extra;
  if (src_.read(&extra, 1) != 0)
    throw Error(ErrorCode::Corrupt, "artifact has extra data after its trailer (expected exactly " +
                                        std::to_string(expected_) + " bytes)");
  finished_ = true;
  return identity;
}

VerifiedArtifact verify_artifact(ByteSource& src) {
  ArtifactReader reader(src);
  ArtifactHeader header = reader.header();
  Digest identity = reader.finish();
  return {std::move(header), identity};
}

VerifiedArtifact verify_artifact(std::span<const uint8_t> bytes) {
  MemorySource src(bytes);
  return verify_artifact(src);
}

}  // namespace kvg
