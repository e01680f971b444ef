#include <cstdio>
#include <filesystem>
#include <unistd.h>

#include "cli/args.hpp"
#include "cli/artifact_flags.hpp"
#include "cli/commands.hpp"
#include "cli/engine_flags.hpp"
#include "cli/progress_line.hpp"
#include "common/error.hpp"

namespace kvg::cli {

int cmd_capture(const Args& args) {
  if (args.has("out") == args.has("store")) throw Error(ErrorCode::InvalidArgument, "give exactly one of --out and --store");
  auto model = load_model(args);
  Session session(model, engine_options(args));

  std::optional<Digest> parent;
  std::vector<int32_t> prefix;
  if (args.has("parent")) {
    auto store = store_from(args);
    if (!store) throw Error(ErrorCode::InvalidArgument, "--parent needs --store (the parent is looked up there)");
    const auto id = digest_from_hex(args.get("parent"));
    if (!id) throw Error(ErrorCode::InvalidArgument, "--parent must be a 64-character hex SHA-256");
    parent = *id;
    const ArtifactRef ref{*id, [store](const Digest& d) { return store->get_unverified(d); }};
    prefix = prompt_after_artifact(args, *model, chain_tokens(ref));
    graft(session, *id, ref.open, prefix);
  } else {
    prefix = prompt_tokens(args, *model);
  }
  const int64_t from = session.n_past();
  if (int64_t(prefix.size()) <= from)
    throw Error(ErrorCode::InvalidArgument, "nothing to capture: the prefix adds no tokens after the parent");
  ProgressLine progress("capture: prefill", "tokens");
  // A progress line needs chunks to report between; chunking never changes a bit.
  const int64_t chunk = args.has("chunk") || !progress.enabled() ? args.get_int("chunk", 0) : 64;
  session.prefill(std::span<const int32_t>(prefix).subspan(size_t(from)), chunk, LogitsFor::None, nullptr, {},
                  progress.reporter());
  progress.clear();

  Digest identity;
  if (args.has("out")) {
    FileSink sink(args.get("out"));
    identity = capture(session, from, session.n_past(), parent, sink);
    sink.close(true);
  } else {
    // Stream to a temporary file next to the store, then let the store take it
    // (it re-hashes while copying): the KV never needs a second copy in memory.
    auto store = store_from(args);
    const std::string temp = store->dir() + "/.capture-" + std::to_string(::getpid());
    {
      FileSink sink(temp);
      identity = capture(session, from, session.n_past(), parent, sink);
      sink.close(true);
    }
    FileSource source(temp);
    const Digest stored = store->put(source);
    std::filesystem::remove(temp);
    if (stored != identity) throw Error(ErrorCode::Internal, "store computed a different hash than the writer");
  }
  std::fprintf(stderr, "captured positions [%lld, %lld) of %s\n", (long long)from, (long long)session.n_past(),
               model->path().c_str());
  std::printf("%s\n", to_hex(identity).c_str());
  return 0;
}

int cmd_verify(const Args& args) {
  if (args.positional().size() != 1) throw Error(ErrorCode::InvalidArgument, "usage: kvg verify FILE");
  FileSource source(args.positional()[0]);
  const VerifiedArtifact verified = verify_artifact(source);
  std::printf("%s\n", header_to_json(verified.header, verified.identity).c_str());
  return 0;
}

}  // namespace kvg::cli
