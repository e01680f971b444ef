#include "engine/mapped_kv.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "engine/chain_check.hpp"
#include "engine/gguf/mapping_guard.hpp"
#include "storage/artifact_format.hpp"

namespace kvg {

// One link's file, mapped read-only for as long as the chain is used.
struct MappedKv::Link {
  std::string path;
  const uint8_t* base = nullptr;
  size_t size = 0;
  std::unique_ptr<gguf::MappingGuard> guard;  // registered after mmap, gone before munmap

  explicit Link(std::string file) : path(std::move(file)) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const int e = errno;
      throw Error(e == ENOENT ? ErrorCode::NotFound : ErrorCode::Io,
                  "cannot open artifact file '" + path + "': " + std::strerror(e));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
      ::close(fd);
      throw Error(ErrorCode::Io, "artifact file '" + path + "' is not a non-empty regular file");
    }
    size = size_t(st.st_size);
    // MAP_SHARED, read-only: backends mapping the same artifact share its
    // page-cache pages, as they share the model's.
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    const int e = errno;
    ::close(fd);  // the mapping keeps the file referenced
    if (p == MAP_FAILED)
      throw Error(ErrorCode::Io, "cannot mmap artifact file '" + path + "' (" + std::to_string(size) +
                                     " bytes): " + std::strerror(e));
    base = static_cast<const uint8_t*>(p);
    guard = std::make_unique<gguf::MappingGuard>(p, size);
  }
  ~Link() {
    guard.reset();
    ::munmap(const_cast<uint8_t*>(base), size);
  }
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  std::span<const uint8_t> bytes() const { return {base, size}; }
  bool intact() const { return !guard->damaged(); }
};

MappedKv::~MappedKv() = default;

std::shared_ptr<const MappedKv> MappedKv::open(const Session& session, const Digest& leaf,
                                               const ArtifactPathOf& path_of,
                                               std::optional<std::span<const int32_t>> prompt) {
  if (session.n_past() != 0)
    throw Error(ErrorCode::InvalidArgument, "mapped KV starts at position 0, but the context already holds " +
                                                std::to_string(session.n_past()) + " positions");
  if (session.options().recipe.kv != KvStorage::F32)
    throw Error(ErrorCode::Unsupported, "mapped KV reads fp32 KV only, and recipe " + session.options().recipe.name() +
                                            " keeps " + kv_storage_name(session.options().recipe.kv) + " KV");
  const ArtifactOpener headers_of = [&](const Digest& id) -> std::unique_ptr<ByteSource> {
    return std::make_unique<FileSource>(path_of(id));
  };
  const ChainPlan plan = plan_chain(session, leaf, headers_of, prompt);
  std::shared_ptr<MappedKv> kv(new MappedKv());
  const int n_layer = session.model().config().n_layer;
  kv->layers_.resize(size_t(n_layer));
  ChainLinkChecker checker(session);
  for (size_t i = 0; i < plan.ids.size(); ++i) {
    auto link = std::make_unique<Link>(path_of(plan.ids[i]));
    const ArtifactHeader h = parse_header(link->bytes());
    // Before the shared checks, which would call a compact dtype a recipe
    // mismatch: attention reads mapped rows as the fp32 they must be.
    if (h.kv_dtype != kKvDtypeF32)
      throw Error(ErrorCode::Unsupported, artifact_label(plan.ids[i]) + "holds KV dtype " +
                                              std::to_string(h.kv_dtype) + "; mapped KV reads fp32 artifacts only");
    checker.check_header(plan, i, h);
    // Every byte hashed once, here; the rows are trusted from then on.
    const VerifiedArtifact verified = verify_artifact(link->bytes());
    ChainLinkChecker::check_identity(verified.identity, plan.ids[i]);
    if (!link->intact())
      throw Error(ErrorCode::Io, "artifact file '" + link->path + "' was truncated while it was verified");
    const size_t block_bytes = h.block_floats() * sizeof(float);
    const uint8_t* payload = link->base + h.header_bytes();
    for (int l = 0; l < n_layer; ++l) {
      const uint8_t* k = payload + size_t(l) * h.layer_bytes();
      kv->layers_[size_t(l)].push_back(KvSegment{int64_t(h.position_start), int64_t(h.position_end()),
                                                 reinterpret_cast<const float*>(k),
                                                 reinterpret_cast<const float*>(k + block_bytes)});
    }
    kv->tokens_.insert(kv->tokens_.end(), h.tokens.begin(), h.tokens.end());
    kv->links_.push_back(plan.ids[i]);
    kv->files_.push_back(std::move(link));
  }
  return kv;
}

int64_t MappedKv::mapped_bytes() const {
  int64_t total = 0;
  for (const auto& f : files_) total += int64_t(f->size);
  return total;
}

void MappedKv::check_intact() const {
  for (const auto& f : files_)
    if (!f->intact())
      throw Error(ErrorCode::Io, "artifact file '" + f->path + "' was truncated while its KV was mapped: what "
                                 "was computed from it since is void, so this call fails. Artifact files must "
                                 "never change once written");
}

GraftedChain graft_mapped(Session& session, const Digest& leaf, const ArtifactPathOf& path_of,
                          std::optional<std::span<const int32_t>> prompt) {
  std::shared_ptr<const MappedKv> kv = MappedKv::open(session, leaf, path_of, prompt);
  session.map_prefix(kv);
  return GraftedChain{kv->links(), kv->n_tokens()};
}

}  // namespace kvg
