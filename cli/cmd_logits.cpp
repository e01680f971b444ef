#include <cstdio>

#include "cli/args.hpp"
#include "cli/artifact_flags.hpp"
#include "cli/commands.hpp"
#include "cli/engine_flags.hpp"
#include "common/error.hpp"

namespace kvg::cli {

int cmd_logits(const Args& args) {
  auto model = load_model(args);
  const auto tokens = parse_token_list(args.get("tokens"));
  if (tokens.empty()) throw Error(ErrorCode::InvalidArgument, "--tokens is empty");
  Session session(model, engine_options(args));
  // With --artifact, --tokens is the whole prompt; the logits written are
  // those of the positions after the artifact's tokens.
  if (args.has("artifact")) {
    const ArtifactRef ref = resolve_artifact(args);
    graft(session, ref.id, ref.open, tokens);
  }
  std::vector<float> logits;
  session.prefill(std::span<const int32_t>(tokens).subspan(size_t(session.n_past())), args.get_int("chunk", 0),
                  LogitsFor::All, &logits);
  const std::string hash = write_logits(args.get("out"), logits);
  std::printf("%s\n", hash.c_str());
  return 0;
}

}  // namespace kvg::cli
