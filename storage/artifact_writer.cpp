#include <algorithm>
#include <cstring>
#include <vector>

#include "common/error.hpp"
#include "storage/artifact_format.hpp"
#include "storage/little_endian.hpp"

namespace kvg {

namespace {
// Hash a piece, then hand the same piece to the sink while it is still in cache.
constexpr size_t kEmitChunk = size_t{1} << 20;
}  // namespace

ArtifactWriter::ArtifactWriter(const ArtifactHeader& header, ByteSink& sink)
    : sink_(sink), payload_bytes_(header.payload_bytes()), layer_bytes_(header.layer_bytes()) {
  std::vector<uint8_t> bytes = encode_header(header);  // validates
  emit(bytes.data(), bytes.size());
}

void ArtifactWriter::emit(const uint8_t* data, size_t n) {
  while (n > 0) {
    size_t k = std::min(n, kEmitChunk);
    sha_.update(data, k);
    sink_.write(data, k);
    data += k;
    n -= k;
  }
}

void ArtifactWriter::write_layer(uint32_t layer, const float* K, const float* V) {
  if (finished_) throw Error(ErrorCode::Internal, "ArtifactWriter::write_layer after finish");
  if (written_ % layer_bytes_ != 0 || written_ / layer_bytes_ != layer || written_ >= payload_bytes_)
    throw Error(ErrorCode::InvalidArgument,
                "ArtifactWriter::write_layer(" + std::to_string(layer) + ") out of order: " +
                    std::to_string(written_) + " of " + std::to_string(payload_bytes_) + " payload bytes written");
  const size_t block_bytes = layer_bytes_ / 2;
  for (const float* block : {K, V}) {
    if constexpr (kHostLittleEndian) {
      emit(reinterpret_cast<const uint8_t*>(block), block_bytes);
    } else {
      std::vector<uint8_t> buf(std::min(block_bytes, kEmitChunk));
      for (size_t off = 0; off < block_bytes; off += buf.size()) {
        size_t k = std::min(buf.size(), block_bytes - off);
        std::memcpy(buf.data(), reinterpret_cast<const uint8_t*>(block) + off, k);
        byteswap_words(buf.data(), k / 4);
        emit(buf.data(), k);
      }
    }
  }
  written_ += layer_bytes_;
}

void ArtifactWriter::write_payload(std::span<const uint8_t> bytes) {
  if (finished_) throw Error(ErrorCode::Internal, "ArtifactWriter::write_payload after finish");
  if (bytes.size() > payload_bytes_ - written_)
    throw Error(ErrorCode::InvalidArgument, "ArtifactWriter::write_payload: " + std::to_string(bytes.size()) +
                                                " bytes would overrun the payload (" +
                                                std::to_string(payload_bytes_ - written_) + " left)");
  emit(bytes.data(), bytes.size());
  written_ += bytes.size();
}

Digest ArtifactWriter::finish() {
  if (finished_) throw Error(ErrorCode::Internal, "ArtifactWriter::finish called twice");
  if (written_ != payload_bytes_)
    throw Error(ErrorCode::InvalidArgument, "artifact payload incomplete: wrote " + std::to_string(written_) +
                                                " of " + std::to_string(payload_bytes_) + " bytes");
  // The trailer covers everything before it; the identity covers the trailer
  // too. A copy of the running state gives both from one pass.
  Digest trailer = Sha256(sha_).finish();
  emit(trailer.data(), trailer.size());
  finished_ = true;
  return sha_.finish();
}

}  // namespace kvg
