// Choosing the next token from logits. Deterministic given the logits bits:
// greedy breaks ties toward the lowest id, and the random stream is keyed by
// (seed, position) so a sampled continuation does not depend on batching,
// chunking or grafting — only on the logits, which the recipe makes exact.
#pragma once

#include <cstdint>
#include <span>

namespace kvg {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  int top_k = 0;             // 0: no limit
  float top_p = 1.0f;        // 1: no limit
  uint64_t seed = 0;
};

// Index of the largest logit; the lowest index among equals.
int32_t argmax(std::span<const float> logits);

// The token for absolute position `position` (the position the token will
// occupy), under params.
int32_t sample_token(std::span<const float> logits, const SamplingParams& params, int64_t position);

// A uniform number in [0, 1) with 24 random bits, from (seed, position) only.
float uniform_for_position(uint64_t seed, int64_t position);

}  // namespace kvg
