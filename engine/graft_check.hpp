// The proof behind every graft: run a prompt twice — once by grafting an
// artifact and evaluating only the rest, once as a single monolithic prefill
// of the whole prompt — and compare the logits of every position after the
// graft point, byte for byte, plus seeded sampled continuations.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <string>

#include "engine/generate.hpp"
#include "engine/graft.hpp"
#include "engine/session.hpp"

namespace kvg {

struct GraftCheckOptions {
  int samples = 0;         // seeded sampled continuations to compare (seeds 0..samples-1)
  int sample_tokens = 16;  // tokens per continuation
  float temperature = 1.0f;
  // Each side's progress as it runs (GenerateOptions' reports): the graft's
  // (index 0), then the recompute's (1).
  std::array<ProgressReport, 2> prefill_reports, decode_reports;
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
// tokens and continue past them by at least one token. Each side is one
// generation (graft_check_generation): the engine worker runs the same two
// as sequences of its own, and compare_graft_check judges them alike.
GraftCheckResult graft_check(std::shared_ptr<const Model> model, const EngineOptions& engine, const Digest& artifact,
                             const ArtifactOpener& open, std::span<const int32_t> prompt,
                             const GraftCheckOptions& options, const ProgressCheck& check = {});

// Refuses (InvalidArgument) a prompt that ends where the artifact's
// `grafted_tokens` end: there is no position to compare.
void require_positions_to_compare(int64_t grafted_tokens, size_t prompt_tokens);

// What each side of a graft check asks as a generation (engine/generate.hpp)
// of the prompt after whatever it grafted: the logits rows of the positions
// from `grafted_tokens` on, then options.samples continuations of
// options.sample_tokens tokens sampled with seeds 0..samples-1, which no
// token stops. The caller sets prompt_logits (and check).
GenerateOptions graft_check_generation(const GraftCheckOptions& options, int64_t grafted_tokens);

// The check's verdict from each side's rows (the positions after the graft,
// n_vocab floats each) and decoded tokens (its continuations, in order, all
// of one length): hashes, KL, argmax agreement, samples equal, exact. The
// times are the caller's to fill in.
GraftCheckResult compare_graft_check(std::span<const float> graft_rows, std::span<const int32_t> graft_samples,
                                     std::span<const float> recompute_rows,
                                     std::span<const int32_t> recompute_samples, int64_t grafted_tokens,
                                     size_t n_vocab, const GraftCheckOptions& options);

// KL(p || q) of the softmax distributions of two logits rows, in double.
double kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits);

// SHA-256 (hex) of fp32 logits as little-endian bytes.
std::string logits_sha256(std::span<const float> logits);

}  // namespace kvg
