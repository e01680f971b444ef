// Seeded random artifacts of a chosen size (see cli/synth_artifact.hpp).
#include "cli/synth_artifact.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "storage/artifact_format.hpp"
#include "storage/little_endian.hpp"

namespace kvg::cli {

namespace {

constexpr const char* kSynthRecipe = "f32-portable-v1";
constexpr size_t kPieceBytes = size_t(1) << 20;
// |size - N| may be at most N / kTolerance (one percent).
constexpr uint64_t kTolerance = 100;

uint64_t mix64(uint64_t x) {  // splitmix64's finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The value of payload float `index`: uniform in [-2, 2) on a 2^-22 grid,
// a function of (seed, index) only, so the bytes do not depend on chunking.
float kv_value(uint64_t seed, uint64_t index) {
  const uint64_t r = mix64(seed * 0x9e3779b97f4a7c15ULL + index + 0x632be59bd9b4e019ULL);
  return float(int64_t(r >> 40) - (int64_t(1) << 23)) * 0x1p-22f;
}

struct Shape {
  uint32_t n_layer, n_head_kv, head_dim;
  uint64_t payload_per_token() const { return uint64_t{8} * n_layer * n_head_kv * head_dim; }  // K+V, f32
};

// Largest first: a model-like KV shape, then ever finer ones, so that small
// sizes can still be hit within a percent.
constexpr Shape kShapes[] = {
    {16, 8, 64}, {16, 8, 32}, {16, 8, 16}, {16, 8, 8}, {16, 8, 4}, {16, 8, 2}, {16, 8, 1}, {16, 4, 1},
    {16, 2, 1},  {16, 1, 1},  {8, 1, 1},   {4, 1, 1},  {2, 1, 1},  {1, 1, 1},
};

uint64_t round_up(uint64_t n, uint64_t align) { return (n + align - 1) / align * align; }

uint64_t total_bytes(const Shape& s, uint64_t n_tokens) {
  const uint64_t header =
      round_up(kHeaderFixedPrefix + std::string(kSynthRecipe).size() + kHeaderFixedMiddle + 4 * n_tokens, kHeaderAlign);
  return header + n_tokens * s.payload_per_token() + kTrailerBytes;
}

uint64_t distance(uint64_t a, uint64_t b) { return a > b ? a - b : b - a; }

struct Plan {
  Shape shape;
  uint64_t n_tokens;
  uint64_t bytes;
};

// The first shape (largest) whose best token count lands within a percent of
// `target`; InvalidArgument with the closest achievable size otherwise.
Plan plan_for(uint64_t target) {
  std::optional<Plan> closest;
  for (const Shape& s : kShapes) {
    const uint64_t per_token = s.payload_per_token() + 4;  // payload plus the token id in the header
    // Fixed bytes besides the tokens: the header's fields and recipe, the
    // trailer; the header's padding (< 64 bytes) is why neighbours are tried.
    const uint64_t fixed = total_bytes(s, 0);
    const uint64_t guess = target > fixed ? (target - fixed) / per_token : 0;
    for (uint64_t n = guess > 2 ? guess - 2 : 1; n <= guess + 2; ++n) {
      if (n > kMaxPositionEnd) break;
      const Plan p{s, n, total_bytes(s, n)};
      if (!closest || distance(p.bytes, target) < distance(closest->bytes, target)) closest = p;
    }
    if (closest && distance(closest->bytes, target) * kTolerance <= target) return *closest;
  }
  throw Error(ErrorCode::InvalidArgument,
              "cannot build an artifact within 1% of " + std::to_string(target) + " bytes (closest: " +
                  (closest ? std::to_string(closest->bytes) : std::string("none")) + " bytes)");
}

}  // namespace

SynthArtifact write_synth_artifact(uint64_t target, uint64_t seed, ByteSink& sink) {
  const Plan plan = plan_for(target);
  ArtifactHeader header;
  header.model_fingerprint = sha256(std::string_view("kvg synth-artifact: benchmark data, no model"));
  header.recipe = kSynthRecipe;
  header.n_layer = plan.shape.n_layer;
  header.n_head_kv = plan.shape.n_head_kv;
  header.head_dim = plan.shape.head_dim;
  header.tokens.resize(plan.n_tokens);
  for (uint64_t i = 0; i < plan.n_tokens; ++i)  // ids a 32000-entry vocabulary could hold, BOS first
    header.tokens[i] = i == 0 ? 1 : uint32_t(3 + mix64(seed ^ (i * 0xd1b54a32d192ed03ULL)) % 31997);
  header.chain_tokens_sha256 = hash_token_ids(header.tokens);
  if (header.total_bytes() != plan.bytes)
    throw Error(ErrorCode::Internal, "synth-artifact size plan disagrees with the codec");

  ArtifactWriter writer(header, sink);
  std::vector<uint8_t> piece(kPieceBytes);
  const uint64_t payload = header.payload_bytes();
  uint64_t index = 0;  // of the next float
  for (uint64_t done = 0; done < payload;) {
    const size_t n = size_t(std::min<uint64_t>(kPieceBytes, payload - done));
    for (size_t off = 0; off < n; off += 4)
      store_u32_le(piece.data() + off, std::bit_cast<uint32_t>(kv_value(seed, index++)));
    writer.write_payload(std::span<const uint8_t>(piece.data(), n));
    done += n;
  }
  return {writer.finish(), plan.bytes, plan.shape.n_layer, plan.shape.n_head_kv, plan.shape.head_dim, plan.n_tokens};
}

}  // namespace kvg::cli
