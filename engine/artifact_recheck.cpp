#include "engine/artifact_recheck.hpp"

#include <chrono>
#include <cmath>
#include <cstring>

#include "common/error.hpp"
#include "engine/prompt.hpp"

namespace kvg {

namespace {

// The identity is all capture() must produce here; the bytes are dropped.
class DiscardSink final : public ByteSink {
 public:
  void write(const uint8_t*, size_t) override {}
};

}  // namespace

Recomputed recompute_artifact(std::shared_ptr<const Model> model, const EngineOptions& options,
                              const ArtifactHeader& header, const ArtifactOpener& open, const ProgressCheck& check) {
  if (header.model_fingerprint != model->fingerprint())
    throw Error(ErrorCode::ModelMismatch, "the artifact was captured with model " + to_hex(header.model_fingerprint) +
                                              ", not with the loaded model " + to_hex(model->fingerprint()) +
                                              ": it cannot be recomputed here");
  // Recomputed under the artifact's own recipe, whatever the caller's default:
  // the question is whether its KV is what that arithmetic gives.
  EngineOptions under_its_recipe = options;
  try {
    under_its_recipe.recipe = parse_recipe(header.recipe);
  } catch (const Error&) {
    throw Error(ErrorCode::RecipeMismatch, "the artifact was computed under recipe '" + header.recipe +
                                               "', which this engine does not compute (" + known_recipe_names() +
                                               "): it cannot be recomputed here");
  }
  std::vector<int32_t> tokens;
  if (header.parent) tokens = chain_tokens(*header.parent, open);
  if (tokens.size() != header.position_start)
    throw Error(ErrorCode::Corrupt, "the artifact starts at position " + std::to_string(header.position_start) +
                                        " but its parent chain holds " + std::to_string(tokens.size()) + " tokens");
  tokens.insert(tokens.end(), header.tokens.begin(), header.tokens.end());
  check_prompt_tokens(*model, tokens.size());

  const auto began = std::chrono::steady_clock::now();
  Session session(std::move(model), under_its_recipe);
  session.prefill(tokens, 128, LogitsFor::None, nullptr, check);
  DiscardSink sink;
  Recomputed r;
  r.identity = capture(session, header.position_start, int64_t(tokens.size()), header.parent, sink);
  r.tokens = int64_t(tokens.size());
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  return r;
}

std::optional<std::string> first_non_finite_kv(const ArtifactHeader& header, std::span<const uint8_t> artifact) {
  const size_t begin = header.header_bytes(), floats = header.payload_bytes() / sizeof(float);
  if (artifact.size() < begin + header.payload_bytes())
    throw Error(ErrorCode::Corrupt, "artifact shorter than its header says");
  const size_t row = size_t(header.n_head_kv) * header.head_dim, block = row * header.n_tokens();
  for (size_t i = 0; i < floats; ++i) {
    float v;
    std::memcpy(&v, artifact.data() + begin + i * sizeof(float), sizeof(float));
    if (std::isfinite(v)) continue;
    const size_t layer = i / (2 * block), in_layer = i % (2 * block);
    return "layer " + std::to_string(layer) + (in_layer < block ? " K" : " V") + ", token " +
           std::to_string(header.position_start + (in_layer % block) / row) + ", element " +
           std::to_string(in_layer % row) + " is " + (std::isnan(v) ? "NaN" : "infinite");
  }
  return std::nullopt;
}

}  // namespace kvg
