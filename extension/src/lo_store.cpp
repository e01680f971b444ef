#include "extension/src/lo_store.hpp"

#include <algorithm>
#include <climits>
#include <cstring>

#include "common/error.hpp"
#include "extension/src/disk_headroom.hpp"
#include "extension/src/owner_rights.hpp"
#include "extension/src/pg_boundary.hpp"
#include "extension/src/spi.hpp"
#include "extension/src/sql_values.hpp"
#include "extension/src/standby.hpp"
#include "extension/src/postgres.hpp"

extern "C" {
#include "utils/snapmgr.h"
}

namespace kvg::pg {

namespace {

// The server's large-object calls, one guard each. We go through be-fsstubs
// (the lo_* SQL functions' C bodies) rather than inv_api.c directly: only
// be-fsstubs registers the end-of-transaction cleanup that closes descriptors
// and pg_largeobject itself; bypassing it leaks relation references.

Oid create_object() {
  return call([] { return DatumGetObjectId(DirectFunctionCall1(be_lo_create, ObjectIdGetDatum(InvalidOid))); });
}

int open_object(Oid loid, int mode) {
  return call([&] {
    // Read mode reads under the active snapshot, which predates whatever
    // this statement has written so far (an import followed by a verify in
    // the same statement); advance it to the current command first.
    PushCopiedSnapshot(GetActiveSnapshot());
    UpdateActiveSnapshotCommandId();
    int fd = DatumGetInt32(DirectFunctionCall2(be_lo_open, ObjectIdGetDatum(loid), Int32GetDatum(mode)));
    PopActiveSnapshot();
    return fd;
  });
}

void write_object(int fd, const uint8_t* data, size_t n) {
  const int written = call([&] { return lo_write(fd, reinterpret_cast<const char*>(data), static_cast<int>(n)); });
  if (written < 0 || static_cast<size_t>(written) != n)
    throw Error(ErrorCode::Io, "short write to a large object (" + std::to_string(written) + " of " +
                                   std::to_string(n) + " bytes)");
}

size_t read_object(int fd, uint8_t* buf, size_t n) {
  const int len = static_cast<int>(std::min<size_t>(n, INT_MAX));
  return static_cast<size_t>(call([&] { return lo_read(fd, reinterpret_cast<char*>(buf), len); }));
}

void close_object(int fd) {
  call([&] { DirectFunctionCall1(be_lo_close, Int32GetDatum(fd)); });
}

// Also closes any descriptor still open on it. Needs the owner's rights.
void drop_object(Oid loid) {
  call([&] { DirectFunctionCall1(be_lo_unlink, ObjectIdGetDatum(loid)); });
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
    fd_ = open_object(loid, INV_READ);
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

LoStore::Writer::Writer(LoStore& store) : store_(store) {
  refuse_on_standby("storing an artifact", "a standby is read-only");
  lo_blocks_at_start_ = disk_headroom::check_before_write();  // kvg.min_free_disk
  OwnerRights owner;  // the object belongs to the owner, not the caller
  loid_ = create_object();
  fd_ = open_object(loid_, INV_WRITE);
  buffer_.reserve(kLargeObjectChunkBytes);
}

LoStore::Writer::~Writer() {
  // After a PostgreSQL ERROR the transaction abort removes the object.
  if (committed_ || error_pending()) return;
  try {
    OwnerRights owner;
    drop_object(loid_);
  } catch (...) {
    // A destructor cannot throw; a PostgreSQL error stays pending and is
    // re-raised by the entry wrapper.
  }
}

void LoStore::Writer::write(const uint8_t* data, size_t n) {
  if (committed_) throw Error(ErrorCode::Internal, "write to a committed large-object writer");
  sha_.update(data, n);
  bytes_ += n;
  while (n > 0) {
    size_t take = std::min(n, kLargeObjectChunkBytes - buffer_.size());
    buffer_.insert(buffer_.end(), data, data + take);
    data += take;
    n -= take;
    if (buffer_.size() == kLargeObjectChunkBytes) flush();
  }
}

void LoStore::Writer::flush() {
  if (buffer_.empty()) return;
  check_for_interrupts();
  write_object(fd_, buffer_.data(), buffer_.size());
  buffer_.clear();
  disk_headroom::check_after_write(lo_blocks_at_start_);
}

Digest LoStore::Writer::commit(const ArtifactMeta& meta, Provenance provenance) {
  if (committed_) throw Error(ErrorCode::Internal, "large-object writer committed twice");
  flush();
  close_object(fd_);
  fd_ = -1;
  const Digest id = sha_.finish();
  if (meta.parent && !store_.exists(*meta.parent))
    throw Error(ErrorCode::NotFound, "parent artifact " + to_hex(*meta.parent) +
                                         " is not stored; store the parent before its continuation");
  const std::string role = calling_role();
  OwnerRights owner;
  // ON CONFLICT waits for a concurrent insert of the same hash to commit or
  // abort, so exactly one of two racing sessions keeps its object.
  auto inserted = store_.spi_.run(
      "INSERT INTO kvg.artifacts (sha256, loid, bytes, n_tokens, model_fingerprint, recipe, parent_sha256, "
      "tokens_sha256, created_by, provenance) VALUES ($1, $2::oid, $3::bigint, $4::integer, $5, $6, $7, $8, "
      "$9::name, $10) ON CONFLICT (sha256) DO NOTHING RETURNING 1",
      {to_hex(id), std::to_string(loid_), std::to_string(bytes_),
       meta.n_tokens ? SqlValue(std::to_string(*meta.n_tokens)) : std::nullopt, optional_hex(meta.model_fingerprint),
       meta.recipe, optional_hex(meta.parent), optional_hex(meta.tokens_sha256), role, provenance_name(provenance)});
  if (inserted.empty()) {
    drop_object(loid_);  // already stored: keep one copy
    // The same bytes, now known to be the engine's: the stored row says so too.
    if (trusted(provenance))
      store_.spi_.run("UPDATE kvg.artifacts SET provenance = $2 WHERE sha256 = $1 "
                      "AND provenance IN ('unverified', 'derived')",
                      {to_hex(id), provenance_name(provenance)});
  }
  committed_ = true;
  return id;
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
  for (const SqlRow& row : spi_.run("SELECT sha256 FROM kvg.artifacts ORDER BY sha256"))
    ids.push_back(parse_digest(row.at(0).value(), "kvg.artifacts.sha256"));
  return ids;
}

std::optional<StoredArtifact> LoStore::find(const Digest& id) {
  OwnerRights owner;
  auto rows = spi_.run(
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
  const auto rows = spi_.run(
      "WITH RECURSIVE chain AS (SELECT sha256, parent_sha256, provenance FROM kvg.artifacts WHERE sha256 = $1 "
      "UNION SELECT a.sha256, a.parent_sha256, a.provenance FROM kvg.artifacts a "
      "JOIN chain c ON a.sha256 = c.parent_sha256) "
      "SELECT count(*) > 0 AND bool_and(provenance IN ('computed', 'verified')) FROM chain",
      {to_hex(leaf)});
  return rows.at(0).at(0) == SqlValue("t");
}

uint64_t LoStore::imported_bytes(const std::string& role) {
  OwnerRights owner;
  const auto rows = spi_.run(
      "SELECT coalesce(sum(bytes), 0) FROM kvg.artifacts WHERE created_by = $1::name "
      "AND provenance IN ('verified', 'unverified')",
      {role});
  return std::stoull(rows.at(0).at(0).value());
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
  OwnerRights owner;
  // Two statements rather than IS NOT DISTINCT FROM, which no index serves.
  const std::vector<SqlRow> rows =
      parent ? spi_.run("SELECT sha256, n_tokens, tokens_sha256 FROM kvg.artifacts "
                        "WHERE parent_sha256 = $1 AND tokens_sha256 = ANY ($2::text[]) "
                        "AND model_fingerprint = $3 AND recipe = $4 "
                        "AND provenance IN ('computed', 'verified') ORDER BY sha256",
                        {to_hex(*parent), hashes, fingerprint, recipe})
             : spi_.run("SELECT sha256, n_tokens, tokens_sha256 FROM kvg.artifacts "
                        "WHERE parent_sha256 IS NULL AND tokens_sha256 = ANY ($1::text[]) "
                        "AND model_fingerprint = $2 AND recipe = $3 "
                        "AND provenance IN ('computed', 'verified') ORDER BY sha256",
                        {hashes, fingerprint, recipe});
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
