#include "cli/artifact_flags.hpp"

#include <algorithm>
#include <filesystem>

#include "cli/engine_flags.hpp"
#include "common/error.hpp"
#include "engine/prompt.hpp"

namespace kvg::cli {

std::shared_ptr<FileStore> store_from(const Args& args) {
  if (!args.has("store")) return nullptr;
  return std::make_shared<FileStore>(args.get("store"));
}

ArtifactRef resolve_artifact(const Args& args) { return resolve_artifact_named(args, args.get("artifact"), "--artifact"); }

ArtifactRef resolve_artifact_named(const Args& args, const std::string& name, const char* flag) {
  auto store = store_from(args);
  ArtifactOpener from_store = [store](const Digest& id) -> std::unique_ptr<ByteSource> {
    if (!store)
      throw Error(ErrorCode::NotFound, "artifact " + to_hex(id) + " is needed (a parent?) but no --store was given");
    return store->get_unverified(id);  // graft() checks the identity
  };
  if (auto id = digest_from_hex(name); id && store && !std::filesystem::exists(name)) return {*id, from_store};
  if (!std::filesystem::exists(name))
    throw Error(ErrorCode::NotFound, std::string(flag) + " '" + name + "' is neither a file nor a hash in --store");
  // A file: its identity is the hash of its bytes.
  FileSource file(name);
  const Digest identity = verify_artifact(file).identity;
  return {identity, [identity, name, from_store](const Digest& id) -> std::unique_ptr<ByteSource> {
            if (id == identity) return std::make_unique<FileSource>(name);
            return from_store(id);
          }};
}

PositionalComposition graft_positional_flag(const Args& args, Session& session) {
  const std::string list = args.get("compose-positional");
  std::vector<ArtifactRef> refs;
  for (size_t pos = 0; pos <= list.size();) {
    const size_t end = std::min(list.find(',', pos), list.size());
    refs.push_back(resolve_artifact_named(args, list.substr(pos, end - pos), "--compose-positional"));
    pos = end + 1;
  }
  std::vector<Digest> leaves;
  for (const auto& r : refs) leaves.push_back(r.id);
  // Each name may be a file: open a link through the ref whose chain it is.
  const ArtifactOpener open = [&refs](const Digest& id) -> std::unique_ptr<ByteSource> {
    for (const auto& r : refs)
      if (r.id == id) return r.open(id);
    return refs.front().open(id);  // a parent: from --store
  };
  return graft_positional(session, leaves, open);
}

std::vector<int32_t> chain_tokens(const ArtifactRef& ref) { return kvg::chain_tokens(ref.id, ref.open); }

std::vector<int32_t> prompt_after_artifact(const Args& args, const Model& model,
                                           const std::vector<int32_t>& chain) {
  if (args.has("tokens") == args.has("text"))
    throw Error(ErrorCode::InvalidArgument, "give exactly one of --tokens and --text");
  if (args.has("tokens")) return parse_token_list(args.get("tokens"));
  return prompt_after_chain(model, chain, args.get("text"));
}

}  // namespace kvg::cli
