#include "extension/src/artifacts/lo_store.hpp"

#include <algorithm>
#include <climits>
#include <cstring>

#include "common/error.hpp"
#include "extension/src/workers/writer/writer.hpp"
#include "extension/src/artifacts/artifact_access.hpp"
#include "extension/src/artifacts/disk_headroom.hpp"
#include "extension/src/roles/owner_rights.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/artifacts/artifact_settings.hpp"
#include "extension/src/spi/spi.hpp"
#include "extension/src/pg/sql_raise.hpp"
#include "extension/src/spi/sql_values.hpp"
#include "extension/src/roles/standby.hpp"
#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "access/xact.h"
#include "utils/snapmgr.h"
}

namespace kvg::pg {

namespace {

// kvg.artifact_store, as kvg's writer runs it (workers/writer/
// writer_statements.hpp), registered while kvg.so loads. Its parameters are
// store_and_claim's values, in order: the content ($2) bytea, the rest text.
// by_writer: this is the writer, which alone keeps each role's storage
// account (docs/security.md).
const writer::StatementKind kArtifactStoreStatement = writer::register_statement({
    .name = "artifact request",
    .sql = "SELECT kvg.artifact_store($1, $2, $3::integer, $4, $5, $6, $7, $8::name, $9, $10::name, $11::bigint, "
           "by_writer => true)",
    .parameters = {writer::ParameterType::Text, writer::ParameterType::Bytea, writer::ParameterType::Text,
                   writer::ParameterType::Text, writer::ParameterType::Text, writer::ParameterType::Text,
                   writer::ParameterType::Text, writer::ParameterType::Text, writer::ParameterType::Text,
                   writer::ParameterType::Text, writer::ParameterType::Text},
    .refusal = "this artifact cannot be stored",
    .refusal_hint = "Artifacts are stored by the same background worker as audit rows (docs/audit-chain.md); "
                    "see kvg_audit_writers() and the server log.",
    // Refused for what it is (its parent gone, the disk full): that error.
    .own_error_prefix = "kvg: the artifact was not stored: ",
    // A large artifact's bytes take long to write: not in the audit rows' lane.
    .lane = writer::Lane::Artifacts,
});

// The server's large-object calls, one guard each. We go through be-fsstubs
// (the lo_* SQL functions' C bodies) rather than inv_api.c directly: only
// be-fsstubs registers the end-of-transaction cleanup that closes descriptors
// and pg_largeobject itself; bypassing it leaks relation references. Objects
// are written by the audit writer only (kvg.artifact_store).

// Opens for reading under the latest committed state: the writer committed
// the object after this transaction's snapshot may have been taken, and an
// artifact's bytes never change.
int open_for_reading(Oid loid) {
  return call([&] {
    PushActiveSnapshot(GetLatestSnapshot());
    int fd = DatumGetInt32(DirectFunctionCall2(be_lo_open, ObjectIdGetDatum(loid), Int32GetDatum(INV_READ)));
    PopActiveSnapshot();
    return fd;
  });
}

size_t read_object(int fd, uint8_t* buf, size_t n) {
  const int len = static_cast<int>(std::min<size_t>(n, INT_MAX));
  return static_cast<size_t>(call([&] { return lo_read(fd, reinterpret_cast<char*>(buf), len); }));
}

SqlValue optional_hex(const std::optional<Digest>& d) { return d ? SqlValue(to_hex(*d)) : std::nullopt; }

std::optional<Digest> optional_digest(const SqlValue& v, const char* what) {
  return v ? std::optional<Digest>(parse_digest(*v, what)) : std::nullopt;
}

// A stored artifact's bytes, in chunks of kLargeObjectChunkBytes.
class LargeObjectSource final : public ByteSource {
 public:
  explicit LargeObjectSource(Oid loid) {
    OwnerRights owner;  // read permission is checked once, at open
    fd_ = open_for_reading(loid);
  }
  ~LargeObjectSource() override {
    if (fd_ >= 0) cleanup([this] { DirectFunctionCall1(be_lo_close, Int32GetDatum(fd_)); });
  }
  LargeObjectSource(const LargeObjectSource&) = delete;
  LargeObjectSource& operator=(const LargeObjectSource&) = delete;

  size_t read(uint8_t* buf, size_t n) override {
    if (n == 0) return 0;
    if (pos_ == filled_) {
      if (at_end_) return 0;
      check_for_interrupts();
      if (n >= kLargeObjectChunkBytes) {  // big reads bypass the buffer
        size_t r = read_object(fd_, buf, n);
        at_end_ = r == 0;
        return r;
      }
      // Not a std::vector: zero-filling 4 MB on every open costs more than
      // reading a small artifact (each graft opens every link twice).
      if (!buffer_) buffer_.reset(new uint8_t[kLargeObjectChunkBytes]);
      filled_ = read_object(fd_, buffer_.get(), kLargeObjectChunkBytes);
      pos_ = 0;
      if (filled_ == 0) {
        at_end_ = true;
        return 0;
      }
    }
    size_t r = std::min(n, filled_ - pos_);
    std::memcpy(buf, buffer_.get() + pos_, r);
    pos_ += r;
    return r;
  }

 private:
  int fd_ = -1;
  std::unique_ptr<uint8_t[]> buffer_;
  size_t filled_ = 0;
  size_t pos_ = 0;
  bool at_end_ = false;
};

}  // namespace

const char* provenance_name(Provenance p) {
  switch (p) {
    case Provenance::Computed: return "computed";
    case Provenance::Verified: return "verified";
    case Provenance::Unverified: return "unverified";
    case Provenance::Derived: return "derived";
  }
  throw Error(ErrorCode::Internal, "unknown provenance");
}

Provenance parse_provenance(const std::string& name) {
  for (Provenance p : {Provenance::Computed, Provenance::Verified, Provenance::Unverified, Provenance::Derived})
    if (name == provenance_name(p)) return p;
  throw Error(ErrorCode::Corrupt, "kvg.artifacts.provenance has an unknown value \"" + name + "\"");
}

ArtifactMeta meta_from_header(const ArtifactHeader& header) {
  return ArtifactMeta{header.n_tokens(), header.model_fingerprint, header.recipe, header.parent,
                      hash_token_ids(header.tokens)};
}

LoStore::Writer::Writer(LoStore& store, Payer payer) : store_(store), payer_(payer) {
  refuse_on_standby("storing an artifact", "a standby is read-only");
  // The audit writer would store it, but this transaction could not claim it.
  if (XactReadOnly) raise_sqlstate("25006", "cannot store an artifact in a read-only transaction");
  (void)disk_headroom::check_before_write();  // kvg.min_free_disk, before the work that makes the bytes
}

LoStore::Writer::~Writer() = default;

void LoStore::Writer::write(const uint8_t* data, size_t n) {
  if (committed_) throw Error(ErrorCode::Internal, "write to a committed artifact writer");
  sha_.update(data, n);
  content_.append(reinterpret_cast<const char*>(data), n);
}

Digest LoStore::Writer::commit(const ArtifactMeta& meta, Provenance provenance) {
  if (committed_) throw Error(ErrorCode::Internal, "artifact writer committed twice");
  const Digest id = sha_.finish();
  if (meta.parent && !store_.exists(*meta.parent))
    throw Error(ErrorCode::NotFound, "parent artifact " + to_hex(*meta.parent) +
                                         " is not stored; store the parent before its continuation");
  // Again, now that the writer is about to grow pg_largeobject by this much.
  (void)disk_headroom::check_before_write(content_.size());
  store_.store_and_claim(id, content_, meta, provenance, payer_);
  committed_ = true;
  content_ = std::string();
  return id;
}

void LoStore::store_and_claim(const Digest& id, const std::string& content, const ArtifactMeta& meta,
                              Provenance provenance, Payer payer) {
  const std::string hex = to_hex(id);
  // Built here from what this backend computed: nothing the caller passed
  // names the role or the provenance. The session user pays, under the
  // quota its session has (a superuser's setting, so the caller cannot
  // change it; ALTER ROLE ... SET gives it at login); or the library.
  const bool library = payer == Payer::Library;
  std::vector<SqlValue> values = {
      hex,
      content,
      meta.n_tokens ? SqlValue(std::to_string(*meta.n_tokens)) : std::nullopt,
      optional_hex(meta.model_fingerprint),
      meta.recipe,
      optional_hex(meta.parent),
      optional_hex(meta.tokens_sha256),
      calling_role(),
      provenance_name(provenance),
      library ? std::string(kLibraryPayer) : session_role(),
      std::to_string(library ? settings::library_storage_quota_bytes() : settings::storage_quota_bytes())};
  try {
    (void)writer::submit(kArtifactStoreStatement, values);
  } catch (const writer::Failure& f) {
    if (library && f.sqlstate == "53400") throw LibraryQuotaExceeded(f.what());
    raise_sqlstate(f.sqlstate.c_str(), f.what(), f.hint);
  }
  OwnerRights owner;
  // Held until this transaction ends, so that no kvg_vacuum takes it. SKIP
  // LOCKED passes over a row that a delete holds rather than waiting for it.
  const char* kLock = "SELECT 1 FROM kvg.artifacts WHERE sha256 = $1 FOR KEY SHARE SKIP LOCKED";
  if (spi_.run_latest(kLock, {hex}).empty()) {
    // Not there for this transaction: it deleted the row itself (the writer
    // still sees it stored), or kvg_vacuum took it the moment the writer
    // committed it. Then it is stored in this transaction, as the writer
    // would store it.
    std::string content_hex;
    content_hex.reserve(content.size() * 2);
    static constexpr char kDigits[] = "0123456789abcdef";
    for (unsigned char c : content) {
      content_hex.push_back(kDigits[c >> 4]);
      content_hex.push_back(kDigits[c & 15]);
    }
    values[1] = std::move(content_hex);
    spi_.run("SELECT kvg.artifact_store($1, pg_catalog.decode($2, 'hex'), $3::integer, $4, $5, $6, $7, $8::name, $9, "
             "$10::name, $11::bigint, by_writer => false)",
             values);
    if (spi_.run_latest(kLock, {hex}).empty())
      throw Error(ErrorCode::Internal, "artifact " + hex + " is not stored after storing it");
  }
  // The claim commits or rolls back with the caller (docs/audit-chain.md).
  // It makes the session user an owner of the artifact, who may read it
  // (docs/security.md): the session user, so that SET ROLE changes nothing.
  spi_.run("INSERT INTO kvg.artifact_claims (sha256, claimed_by) VALUES ($1, session_user)", {hex});
}

Digest LoStore::put(ByteSource& src, const ArtifactMeta& meta, Provenance provenance) {
  Writer sink = writer();
  std::vector<uint8_t> chunk(kLargeObjectChunkBytes);
  while (size_t n = src.read(chunk.data(), chunk.size())) sink.write(chunk.data(), n);
  return sink.commit(meta, provenance);
}

std::unique_ptr<HashVerifyingSource> LoStore::open(const Digest& id) {
  return std::make_unique<HashVerifyingSource>(get_unverified(id), id, "stored artifact");
}

std::unique_ptr<ByteSource> LoStore::get_unverified(const Digest& id) {
  return std::make_unique<LargeObjectSource>(require(id).loid);
}

std::vector<Digest> LoStore::list() {
  OwnerRights owner;
  std::vector<Digest> ids;
  for (const SqlRow& row : spi_.run_latest("SELECT sha256 FROM kvg.artifacts ORDER BY sha256"))
    ids.push_back(parse_digest(row.at(0).value(), "kvg.artifacts.sha256"));
  return ids;
}

std::optional<StoredArtifact> LoStore::find(const Digest& id) {
  OwnerRights owner;
  auto rows = spi_.run_latest(
      "SELECT loid, bytes, n_tokens, model_fingerprint, recipe, parent_sha256, tokens_sha256, provenance "
      "FROM kvg.artifacts WHERE sha256 = $1",
      {to_hex(id)});
  if (rows.empty()) return std::nullopt;
  const SqlRow& r = rows.front();
  StoredArtifact a;
  a.id = id;
  a.loid = static_cast<uint32_t>(std::stoul(r.at(0).value()));
  a.bytes = std::stoull(r.at(1).value());
  if (r.at(2)) a.meta.n_tokens = static_cast<uint32_t>(std::stoul(*r[2]));
  a.meta.model_fingerprint = optional_digest(r.at(3), "kvg.artifacts.model_fingerprint");
  a.meta.recipe = r.at(4);
  a.meta.parent = optional_digest(r.at(5), "kvg.artifacts.parent_sha256");
  a.meta.tokens_sha256 = optional_digest(r.at(6), "kvg.artifacts.tokens_sha256");
  a.provenance = parse_provenance(r.at(7).value());
  return a;
}

std::vector<StoredArtifact> LoStore::chain(const Digest& leaf) {
  std::vector<StoredArtifact> rows;
  for (std::optional<Digest> id = leaf; id; id = rows.back().meta.parent) {
    if (rows.size() > 100000) throw Error(ErrorCode::Corrupt, "artifact chain is implausibly long (a cycle?)");
    rows.push_back(require(*id));
  }
  std::reverse(rows.begin(), rows.end());
  return rows;
}

StoredArtifact LoStore::require(const Digest& id) {
  if (auto a = find(id)) return *a;
  // A standby behind the primary lacks what the primary stored since.
  throw Error(ErrorCode::NotFound, "artifact " + to_hex(id) + " is not stored" +
                                       (on_standby() ? " on this standby, which has replayed the primary's WAL up to " +
                                                           replayed_up_to() +
                                                           ": one stored on the primary since has not arrived yet"
                                                     : ""));
}

bool LoStore::chain_trusted(const Digest& leaf) {
  OwnerRights owner;
  // UNION (not ALL) stops a cycle, which a parent foreign key cannot form
  // anyway: a link's identity covers its parent's.
  const auto rows = spi_.run_latest(
      "WITH RECURSIVE chain AS (SELECT sha256, parent_sha256, provenance FROM kvg.artifacts WHERE sha256 = $1 "
      "UNION SELECT a.sha256, a.parent_sha256, a.provenance FROM kvg.artifacts a "
      "JOIN chain c ON a.sha256 = c.parent_sha256) "
      "SELECT count(*) > 0 AND bool_and(provenance IN ('computed', 'verified')) FROM chain",
      {to_hex(leaf)});
  return rows.at(0).at(0) == SqlValue("t");
}

std::vector<StoredLink> LoStore::links(const std::optional<Digest>& parent, std::span<const Digest> tokens_sha256,
                                       const Digest& model_fingerprint, const std::string& recipe) {
  // An array literal of hex strings needs no quoting.
  std::string hashes = "{";
  for (const Digest& d : tokens_sha256) {
    if (hashes.size() > 1) hashes += ',';
    hashes += to_hex(d);
  }
  hashes += '}';
  const std::string fingerprint = to_hex(model_fingerprint);
  // Only the links the caller may read (its own and published ones, or all
  // for a caller who reads every artifact; docs/security.md), so that which
  // prompts other users stored cannot be timed through what a call grafts.
  // Asked of each row with the owner's rights (artifact_access.hpp).
  // Two statements rather than IS NOT DISTINCT FROM, which no index serves.
  const std::string reads_all = caller_reads_every_artifact(spi_) ? "t" : "f";
  OwnerRights owner;
  const std::vector<SqlRow> rows =
      parent ? spi_.run_latest("SELECT sha256, n_tokens, tokens_sha256 FROM kvg.artifacts "
                        "WHERE parent_sha256 = $1 AND tokens_sha256 = ANY ($2::text[]) "
                        "AND model_fingerprint = $3 AND recipe = $4 "
                        "AND provenance IN ('computed', 'verified') "
                        "AND ($5::boolean OR kvg.artifact_readable(sha256)) ORDER BY sha256",
                        {to_hex(*parent), hashes, fingerprint, recipe, reads_all})
             : spi_.run_latest("SELECT sha256, n_tokens, tokens_sha256 FROM kvg.artifacts "
                        "WHERE parent_sha256 IS NULL AND tokens_sha256 = ANY ($1::text[]) "
                        "AND model_fingerprint = $2 AND recipe = $3 "
                        "AND provenance IN ('computed', 'verified') "
                        "AND ($4::boolean OR kvg.artifact_readable(sha256)) ORDER BY sha256",
                        {hashes, fingerprint, recipe, reads_all});
  std::vector<StoredLink> links;
  for (const SqlRow& r : rows) {
    StoredLink link;
    link.id = parse_digest(r.at(0).value(), "kvg.artifacts.sha256");
    link.n_tokens = std::stoll(r.at(1).value());
    link.tokens_sha256 = parse_digest(r.at(2).value(), "kvg.artifacts.tokens_sha256");
    links.push_back(link);
  }
  return links;
}

}  // namespace kvg::pg
