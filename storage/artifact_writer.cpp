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
    : sink_(sink),
      kv_dtype_(header.kv_dtype),
      head_dim_(header.head_dim),
      row_bytes_(header.head_row_bytes()),
      canon_(header.kv_dtype, header.n_head_kv, header.head_dim, header.n_tokens(), header.position_start),
      payload_bytes_(header.payload_bytes()),
      layer_bytes_(header.layer_bytes()) {
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
  for (const float* block : {K, V}) write_block(block);
}

void ArtifactWriter::write_block(const float* block) {
  const size_t block_bytes = layer_bytes_ / 2;
  if (kv_dtype_ == kKvDtypeF32 && kHostLittleEndian) {
    emit(reinterpret_cast<const uint8_t*>(block), block_bytes);  // f32 payload bytes are the floats
    written_ += block_bytes;
    return;
  }
  // Encoded a bounded number of rows at a time (rows of one block are contiguous).
  const size_t row_bytes = row_bytes_, head_dim = head_dim_;
  const size_t rows = block_bytes / row_bytes, per_piece = std::max<size_t>(1, kEmitChunk / row_bytes);
  std::vector<uint8_t> buf(std::min(rows, per_piece) * row_bytes);
  for (size_t r = 0; r < rows; r += per_piece) {
    const size_t n = std::min(per_piece, rows - r);
    const size_t done = encode_kv_rows(kv_dtype_, head_dim_, block + r * head_dim, n, buf.data());
    if (done != n) {
      throw Error(ErrorCode::InvalidArgument,
                  "ArtifactWriter: KV row " + canon_.place(written_ / row_bytes + done) +
                      " is not what kv_dtype " + kv_dtype_name(kv_dtype_) +
                      " stores (its values are not rounded to it): the KV cache was not rounded for this storage");
    }
    emit_payload(buf.data(), n * row_bytes);
  }
}

void ArtifactWriter::emit_payload(const uint8_t* data, size_t n) {
  if (auto problem = canon_.feed(data, n))
    throw Error(ErrorCode::InvalidArgument, "ArtifactWriter: non-canonical KV row, " + *problem);
  emit(data, n);
  written_ += n;
}

void ArtifactWriter::write_payload(std::span<const uint8_t> bytes) {
  if (finished_) throw Error(ErrorCode::Internal, "ArtifactWriter::write_payload after finish");
  if (bytes.size() > payload_bytes_ - written_)
    throw Error(ErrorCode::InvalidArgument, "ArtifactWriter::write_payload: " + std::to_string(bytes.size()) +
                                                " bytes would overrun the payload (" +
                                                std::to_string(payload_bytes_ - written_) + " left)");
  emit_payload(bytes.data(), bytes.size());
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
