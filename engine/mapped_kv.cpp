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
#include "storage/kv_codec.hpp"

namespace kvg {

// One link's file, mapped read-only for as long as the chain is used.
struct MappedKv::Link {
  std::string path;
  const uint8_t* base = nullptr;
  size_t size = 0;
  FileIdentity identity;  // as mapped
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
    identity = identity_of(st);
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
                                               std::optional<std::span<const int32_t>> prompt,
                                               const VouchedFile& vouched) {
  if (session.n_past() != 0)
    throw Error(ErrorCode::InvalidArgument, "mapped KV starts at position 0, but the context already holds " +
                                                std::to_string(session.n_past()) + " positions");
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
    // The recipe names the KV storage: another storage's link is refused here.
    checker.check_header(plan, i, h);
    // Every byte hashed once, here (or before, by whoever vouches for this
    // very file); the rows are trusted from then on.
    if (!(vouched && vouched(plan.ids[i], link->identity)))
      ChainLinkChecker::check_identity(verify_artifact(link->bytes()).identity, plan.ids[i]);
    if (!link->intact())
      throw Error(ErrorCode::Io, "artifact file '" + link->path + "' was truncated while it was verified");
    const uint8_t* payload = link->base + h.header_bytes();
    for (int l = 0; l < n_layer; ++l) {
      const uint8_t* k = payload + size_t(l) * h.layer_bytes();
      KvSegment segment{int64_t(h.position_start), int64_t(h.position_end())};
      if (h.kv_dtype == kKvDtypeF32) {  // the cache's own row layout: read in place
        segment.k = reinterpret_cast<const float*>(k);
        segment.v = reinterpret_cast<const float*>(k + h.block_bytes());
      } else {  // compact rows (canonical: verified), widened as attention reads them
        segment.widen = &decode_kv_rows;
        segment.dtype = h.kv_dtype;
        segment.k_rows = k;
        segment.v_rows = k + h.block_bytes();
        segment.row_bytes = int64_t(h.head_row_bytes());
        segment.n_head_kv = int(h.n_head_kv);
      }
      kv->layers_[size_t(l)].push_back(segment);
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
                          std::optional<std::span<const int32_t>> prompt, const VouchedFile& vouched) {
  std::shared_ptr<const MappedKv> kv = MappedKv::open(session, leaf, path_of, prompt, vouched);
  session.map_prefix(kv);
  return GraftedChain{kv->links(), kv->n_tokens()};
}

}  // namespace kvg
