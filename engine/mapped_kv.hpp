// Context beyond memory (docs/long-context.md): the KV of a stored artifact
// chain read in place from read-only mappings of its files, instead of being
// copied into the session's resident cache. The session's attention reads
// positions below the chain's end from the mappings and later ones from the
// cache (KvLayout::prefix, kernels/cpu/attention.hpp), in the same blocks and
// order, so the logits are the same bits as a resident graft's; only the
// resident positions count against EngineOptions::max_kv_bytes.
//
// Every link is verified when the chain is mapped, with graft()'s own checks
// (engine/chain_check.hpp) and a hash of every byte, unless whoever keeps
// the files vouches for that very file (VouchedFile: hashed before, and its
// identity unchanged since). The files must
// not change afterwards: a content-addressed file store writes each object
// once and renames it into place. A file truncated under the session is
// caught (its lost pages read as zeros and the next forward() fails, never
// SIGBUS); a file rewritten in place is not, so a store that cannot promise
// immutability must not be mapped.
//
// fp32 rows are read in place; compact rows (kv_dtype bf16, i8) are widened
// as attention reads them, into exactly the floats a resident cache of that
// storage holds (kernels/cpu/attention.hpp: KvSegment::widen). The recipe
// names the storage, so a chain of another storage is refused by name. CPU
// sessions only: a CUDA session is refused by name.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/file_identity.hpp"
#include "engine/graft.hpp"
#include "engine/session.hpp"
#include "kernels/cpu/attention.hpp"

namespace kvg {

// The file holding an artifact (FileStore::path_of); NotFound when unknown.
using ArtifactPathOf = std::function<std::string(const Digest&)>;

// Whether the file mapped for artifact `id`, as fstat identifies it, is
// known to hold exactly that artifact's bytes: its SHA-256 is then not
// computed again (every other check still runs). Nothing: always hashed.
using VouchedFile = std::function<bool(const Digest& id, const FileIdentity& file)>;

class MappedKv {
 public:
  // Maps every link of the chain ending in `leaf` and verifies it for
  // `session` (which must hold no positions: the chain starts at 0): the
  // checks graft() makes, including `prompt` beginning with the chain's tokens.
  static std::shared_ptr<const MappedKv> open(const Session& session, const Digest& leaf,
                                              const ArtifactPathOf& path_of,
                                              std::optional<std::span<const int32_t>> prompt = std::nullopt,
                                              const VouchedFile& vouched = {});
  ~MappedKv();
  MappedKv(const MappedKv&) = delete;
  MappedKv& operator=(const MappedKv&) = delete;

  int64_t n_tokens() const { return int64_t(tokens_.size()); }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const std::vector<Digest>& links() const { return links_; }  // root first
  // Layer `layer`'s rows of positions [0, n_tokens()), one segment per link.
  std::span<const KvSegment> layer(int layer) const { return layers_[size_t(layer)]; }
  int64_t mapped_bytes() const;
  // Throws Io when a mapped file was truncated since it was verified (its
  // rows read as zeros from then on: whatever used them is void).
  void check_intact() const;

 private:
  struct Link;
  MappedKv() = default;

  std::vector<std::unique_ptr<Link>> files_;
  std::vector<std::vector<KvSegment>> layers_;
  std::vector<int32_t> tokens_;
  std::vector<Digest> links_;
};

// Maps the chain into an empty CPU session (Session::map_prefix) instead of
// copying it: graft() without the copy. On a refusal the session is unchanged.
GraftedChain graft_mapped(Session& session, const Digest& leaf, const ArtifactPathOf& path_of,
                          std::optional<std::span<const int32_t>> prompt = std::nullopt,
                          const VouchedFile& vouched = {});

}  // namespace kvg
