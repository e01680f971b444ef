#include <cstdio>

#include "cli/args.hpp"
#include "cli/artifact_flags.hpp"
#include "cli/commands.hpp"
#include "cli/engine_flags.hpp"
#include "engine/graft_check.hpp"
#include "engine/request_limits.hpp"

namespace kvg::cli {

// Exit status 0 exactly when the grafted run's logits bytes (and every
// sampled continuation) equal the monolithic recompute's.
int cmd_graft_check(const Args& args) {
  auto model = load_model(args);
  const ArtifactRef ref = resolve_artifact(args);
  const auto prompt = prompt_after_artifact(args, *model, chain_tokens(ref));
  GraftCheckOptions options;
  options.samples = int(args.get_int("samples", 0, 0, 100000));
  const int64_t sample_tokens = args.get_int("sample-tokens", 16);
  check_new_tokens(sample_tokens, "--sample-tokens");
  options.sample_tokens = int(sample_tokens);
  const EngineOptions engine = engine_options(args);
  const GraftCheckResult r = graft_check(model, engine, ref.id, ref.open, prompt, options);
  std::printf(
      "{\"artifact\":\"%s\",\"grafted_tokens\":%lld,\"positions\":%lld,\"graft_logits_sha256\":\"%s\","
      "\"recompute_logits_sha256\":\"%s\",\"kl_max\":%.17g,\"argmax_agreement\":%.17g,\"samples\":%d,"
      "\"samples_equal\":%d,\"exact\":%s,\"graft_seconds\":%.6f,\"recompute_seconds\":%.6f,\"recipe\":\"%s\"}\n",
      to_hex(ref.id).c_str(), (long long)r.grafted_tokens, (long long)r.positions, r.graft_logits_sha256.c_str(),
      r.recompute_logits_sha256.c_str(), r.kl_max, r.argmax_agreement, r.samples, r.samples_equal,
      r.exact ? "true" : "false", r.graft_seconds, r.recompute_seconds, engine.recipe.name().c_str());
  return r.exact ? 0 : 1;
}

}  // namespace kvg::cli
