// Valid artifacts of about N bytes whose KV payload is seeded pseudo-random
// floats, so that storage can be measured at sizes no small model's context
// reaches (issue #4). The bytes go through the storage codec's ArtifactWriter
// in 1 MiB pieces (memory stays constant apart from the header's token ids, 4
// bytes per token) and are a function of (N, seed) only.
//
// Such an artifact belongs to no model: its fingerprint is a fixed digest, so
// it can be stored, exported, imported and verified, but never grafted.
#pragma once

#include <cstdint>

#include "storage/byte_stream.hpp"
#include "storage/sha256.hpp"

namespace kvg::cli {

struct SynthArtifact {
  Digest id{};
  uint64_t bytes = 0;
  uint32_t n_layer = 0, n_head_kv = 0, head_dim = 0;
  uint64_t n_tokens = 0;
};

// Writes an artifact within 1% of `target` bytes to `sink` (not closed).
// InvalidArgument when no shape lands that close.
SynthArtifact write_synth_artifact(uint64_t target, uint64_t seed, ByteSink& sink);

}  // namespace kvg::cli
