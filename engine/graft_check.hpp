// The proof behind every graft: run a prompt twice — once by grafting an
// artifact and evaluating only the rest, once as a single monolithic prefill
// of the whole prompt — and compare the logits of every position after the
// graft point, byte for byte, plus seeded sampled continuations.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "engine/graft.hpp"
#include "engine/session.hpp"

namespace kvg {

struct GraftCheckOptions {
  int samples = 0;         // seeded sampled continuations to compare (seeds 0..samples-1)
  int sample_tokens = 16;  // tokens per continuation
  float temperature = 1.0f;
};

struct GraftCheckResult {
  std::string graft_logits_sha256;
  std::string recompute_logits_sha256;
  double kl_max = 0;            // max over positions of KL(recompute || graft); NaN when a logit is not finite
  double argmax_agreement = 0;  // fraction of positions with the same argmax
  int64_t positions = 0;        // positions compared (after the graft point)
  int64_t grafted_tokens = 0;
  int samples = 0;
  int samples_equal = 0;
  bool exact = false;           // every logit finite, logits bytes equal and every sample equal
  double graft_seconds = 0;     // graft + evaluate the continuation
  double recompute_seconds = 0; // evaluate the whole prompt
};

// `prompt` is the whole prompt and must begin with the artifact chain's
// tokens and continue past them by at least one token.
GraftCheckResult graft_check(std::shared_ptr<const Model> model, const EngineOptions& engine, const Digest& artifact,
                             const ArtifactOpener& open, std::span<const int32_t> prompt,
                             const GraftCheckOptions& options, const ProgressCheck& check = {});

// KL(p || q) of the softmax distributions of two logits rows, in double.
double kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits);

// SHA-256 (hex) of fp32 logits as little-endian bytes.
std::string logits_sha256(std::span<const float> logits);

}  // namespace kvg
