// The artifact store inside the database: each artifact is one large object,
// indexed by its SHA-256 in kvg.artifacts. Content is stored once.
//
// Artifacts are immutable and content-addressed, so they are not stored in
// the caller's transaction, where a second session storing the same bytes
// would wait for the first to commit or roll back: the database's audit
// writer (workers/writer/writer.hpp) creates the object and inserts the row in a
// transaction of its own, with kvg.artifact_store, and commits before the
// store returns. The caller then holds the row with FOR KEY SHARE (so no
// kvg_vacuum or kvg_artifact_delete removes it while the caller's transaction
// runs) and records a claim in kvg.artifact_claims, which commits or rolls
// back with the caller: an artifact that nothing claims or references is what
// kvg_vacuum collects (docs/audit-chain.md, "Artifacts"). Reads of the
// catalog and of the objects use the latest committed state, not the
// transaction's snapshot, so a REPEATABLE READ or SERIALIZABLE caller sees
// what it has just stored; for immutable rows that is the same answer.
//
// Large objects are read and written in 4 MB chunks: every read starts an
// index scan of pg_largeobject (2 KB pages), so small reads cost far more.
// All work happens with the owner's rights (owner_rights.hpp), except the
// prefix-reuse lookup (links), which sees only what the caller may read.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/prefix_search.hpp"
#include "storage/artifact_format.hpp"
#include "storage/artifact_store.hpp"

namespace kvg::pg {

class Spi;

inline constexpr size_t kLargeObjectChunkBytes = size_t{4} << 20;

// The kvg.artifacts columns that come from the artifact header. A put of bare
// bytes (the generic ArtifactStore interface) leaves them NULL.
struct ArtifactMeta {
  std::optional<uint32_t> n_tokens;
  std::optional<Digest> model_fingerprint;
  std::optional<std::string> recipe;
  std::optional<Digest> parent;
  std::optional<Digest> tokens_sha256;  // hash_token_ids of the artifact's own tokens
};

ArtifactMeta meta_from_header(const ArtifactHeader& header);

// How an artifact's KV came to be (kvg.artifacts.provenance, docs/security.md).
// Only trusted ones (computed, verified) are grafted without being asked for.
enum class Provenance { Computed, Verified, Unverified, Derived };
const char* provenance_name(Provenance p);
Provenance parse_provenance(const std::string& name);
inline bool trusted(Provenance p) { return p == Provenance::Computed || p == Provenance::Verified; }

// One row of kvg.artifacts.
struct StoredArtifact {
  Digest id{};
  uint32_t loid = 0;
  uint64_t bytes = 0;
  ArtifactMeta meta;
  Provenance provenance = Provenance::Unverified;
};

// Who a stored artifact is charged to (kvg.storage_charges): the session
// user under its kvg.storage_quota, or, for chain links an answer composes
// from library entries, the library's account ("(library)", no role's)
// under kvg.library_storage_quota, so that an entry never makes a question
// fail on the asker's quota (docs/security.md, promise 7).
enum class Payer { SessionUser, Library };
inline constexpr const char* kLibraryPayer = "(library)";

// A library link refused by kvg.library_storage_quota: the audit writer
// refused it in its own transaction, so this one is intact and the caller
// goes on without storing (an answer is answered all the same).
class LibraryQuotaExceeded final : public Error {
 public:
  explicit LibraryQuotaExceeded(const std::string& what) : Error(ErrorCode::OutOfRange, what) {}
};

class LoStore final : public ArtifactStore {
 public:
  // Collects an artifact's bytes while hashing them; commit() has the audit
  // writer store them. Destroyed uncommitted, it stores nothing.
  class Writer final : public ByteSink {
   public:
    ~Writer() override;
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;

    void write(const uint8_t* data, size_t n) override;
    // Has the bytes stored (kept once when already stored, also by another
    // session that has not committed; a stored row that was not trusted
    // becomes trusted when `provenance` is) and claims them for this
    // transaction. A parent in `meta` must already be stored (NotFound
    // otherwise). Past the payer's quota: 53400, or for the library
    // LibraryQuotaExceeded.
    Digest commit(const ArtifactMeta& meta, Provenance provenance);

   private:
    friend class LoStore;
    Writer(LoStore& store, Payer payer);

    LoStore& store_;
    Payer payer_;
    Sha256 sha_;
    std::string content_;
    bool committed_ = false;
  };

  // Runs its catalog statements on the caller's SPI connection.
  explicit LoStore(Spi& spi) : spi_(spi) {}

  Writer writer(Payer payer = Payer::SessionUser) { return Writer(*this, payer); }
  Digest put(ByteSource& src, const ArtifactMeta& meta, Provenance provenance);

  // Bare bytes through the generic interface: nobody vouches for their KV.
  Digest put(ByteSource& src) override { return put(src, ArtifactMeta{}, Provenance::Unverified); }
  std::unique_ptr<ByteSource> get(const Digest& id) override { return open(id); }
  std::unique_ptr<ByteSource> get_unverified(const Digest& id) override;
  // get() with its concrete type, for bytes_read().
  std::unique_ptr<HashVerifyingSource> open(const Digest& id);
  bool exists(const Digest& id) override { return find(id).has_value(); }
  std::vector<Digest> list() override;

  std::optional<StoredArtifact> find(const Digest& id);
  // find(), or NotFound naming the hash.
  StoredArtifact require(const Digest& id);
  // The rows of the chain ending in `leaf`, root first (require() each,
  // following parent_sha256): its links without reading their bytes.
  std::vector<StoredArtifact> chain(const Digest& leaf);
  // Whether every link of the chain ending in `leaf` is trusted.
  bool chain_trusted(const Digest& leaf);

  // The prefix-reuse index (engine/prefix_search.hpp): trusted links of this
  // model and recipe continuing `parent` (roots when nullopt) whose own token
  // hash is one of `tokens_sha256`, ordered by identity. Reads the catalog
  // only. Untrusted links are never offered: a forged artifact under the
  // same tokens must not stand in for the engine's own KV; nor are links the
  // caller may not read (artifact_access.hpp): it runs with the caller's
  // rights, under kvg.artifacts' row-level security.
  std::vector<StoredLink> links(const std::optional<Digest>& parent, std::span<const Digest> tokens_sha256,
                                const Digest& model_fingerprint, const std::string& recipe);

 private:
  // The audit writer stores `content` (whose SHA-256 is `id`); then this
  // transaction locks the row and claims it.
  void store_and_claim(const Digest& id, const std::string& content, const ArtifactMeta& meta,
                       Provenance provenance, Payer payer);

  Spi& spi_;
};

}  // namespace kvg::pg
