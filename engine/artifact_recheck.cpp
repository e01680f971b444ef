#include "engine/artifact_recheck.hpp"

#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/error.hpp"
#include "engine/prompt.hpp"

namespace kvg {

RecomputePlan plan_recompute(const Model& model, const EngineOptions& options, const ArtifactHeader& header,
                             const ArtifactOpener& open) {
  if (header.model_fingerprint != model.fingerprint())
    throw Error(ErrorCode::ModelMismatch, "the artifact was captured with model " + to_hex(header.model_fingerprint) +
                                              ", not with the loaded model " + to_hex(model.fingerprint()) +
                                              ": it cannot be recomputed here");
  // Recomputed under the artifact's own recipe, whatever the caller's default:
  // the question is whether its KV is what that arithmetic gives.
  RecomputePlan plan{{}, options};
  try {
    plan.options.recipe = parse_recipe(header.recipe);
  } catch (const Error&) {
    throw Error(ErrorCode::RecipeMismatch, "the artifact was computed under recipe '" + header.recipe +
                                               "', which this engine does not compute (" + known_recipe_names() +
                                               "): it cannot be recomputed here");
  }
  if (header.kv_dtype != uint32_t(plan.options.recipe.kv))
    throw Error(ErrorCode::RecipeMismatch, "the artifact stores its KV as " + kv_dtype_name(header.kv_dtype) +
                                               " but names recipe '" + header.recipe + "', which keeps " +
                                               kv_storage_name(plan.options.recipe.kv) +
                                               " KV: it cannot be recomputed here");
  if (header.parent) plan.tokens = chain_tokens(*header.parent, open);
  if (plan.tokens.size() != header.position_start)
    throw Error(ErrorCode::Corrupt, "the artifact starts at position " + std::to_string(header.position_start) +
                                        " but its parent chain holds " + std::to_string(plan.tokens.size()) + " tokens");
  plan.tokens.insert(plan.tokens.end(), header.tokens.begin(), header.tokens.end());
  check_prompt_tokens(model, plan.tokens.size());
  return plan;
}

Recomputed recompute_artifact(std::shared_ptr<const Model> model, const EngineOptions& options,
                              const ArtifactHeader& header, const ArtifactOpener& open, const ProgressCheck& check,
                              const ProgressReport& report) {
  const RecomputePlan plan = plan_recompute(*model, options, header, open);
  const auto began = std::chrono::steady_clock::now();
  Session session(std::move(model), plan.options);
  session.prefill(plan.tokens, 128, LogitsFor::None, nullptr, check, report);
  DiscardSink sink;  // the identity is all capture() must produce here
  Recomputed r;
  r.identity = capture(session, header.position_start, int64_t(plan.tokens.size()), header.parent, sink);
  r.tokens = int64_t(plan.tokens.size());
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  return r;
}

std::optional<std::string> first_non_finite_kv(const ArtifactHeader& header, std::span<const uint8_t> artifact) {
  const size_t begin = header.header_bytes();
  if (artifact.size() < begin + header.payload_bytes())
    throw Error(ErrorCode::Corrupt, "artifact shorter than its header says");
  // Row by row in the artifact's own dtype: decoded exactly as a graft would.
  const size_t row_bytes = header.head_row_bytes(), rows = header.payload_bytes() / row_bytes;
  std::vector<float> values(header.head_dim);
  for (size_t r = 0; r < rows; ++r) {
    const uint8_t* row = artifact.data() + begin + r * row_bytes;
    if (auto problem = kv_row_problem(header.kv_dtype, header.head_dim, row))
      throw Error(ErrorCode::Corrupt, "artifact has a non-canonical KV row, " +
                                          kv_row_place(r, header.n_head_kv, header.n_tokens(), header.position_start) +
                                          ": " + *problem);
    decode_kv_rows(header.kv_dtype, header.head_dim, row, 1, values.data());
    for (size_t i = 0; i < values.size(); ++i) {
      if (std::isfinite(values[i])) continue;
      const KvRowPlace p = locate_kv_row(r, header.n_head_kv, header.n_tokens(), header.position_start);
      return "layer " + std::to_string(p.layer) + (p.is_v ? " V" : " K") + ", token " + std::to_string(p.token) +
             ", element " + std::to_string(size_t(p.head) * header.head_dim + i) + " is " +
             (std::isnan(values[i]) ? "NaN" : "infinite");
    }
  }
  return std::nullopt;
}

}  // namespace kvg
