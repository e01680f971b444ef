// The artifact files a long-lived process maps chains from (the engine
// worker: docs/long-context.md, "Mapped chains in the server"). A
// content-addressed directory (storage/file_store.hpp's layout) derived from
// an authoritative store, the large objects: it holds only bytes a caller
// read from there and verified, and it can always be rebuilt, so it is a
// cache, never a source of truth.
//
// A file is trusted only while this process knows it: hashed once (or
// written here from verified bytes) and its identity (common/file_identity.hpp)
// unchanged since. A file this process has not verified — left by an earlier
// run, or changed, or replaced since — is hashed on first use, and removed
// when it is not its artifact's bytes: the caller is then asked for them
// again. So a flipped byte, a truncated or deleted file is never served: it
// is rebuilt. (A write in place while a chain is mapped is outside this: the
// directory belongs to the server's OS user, as its data files do.)
//
// Bounded: beyond max_bytes the least recently used files are removed (never
// one the chain in hand needs; a mapping keeps a removed file's pages alive).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/file_identity.hpp"
#include "engine/mapped_kv.hpp"
#include "storage/file_store.hpp"

namespace kvg {

class MappedKvFiles {
 public:
  // Creates `dir` when missing (Io otherwise); the files already there are
  // counted against `max_bytes` and trusted only once verified.
  MappedKvFiles(std::string dir, int64_t max_bytes);

  // The ids among `ids` whose bytes must be supplied (put()): no file, or a
  // file that is not its artifact (removed). Verifies, once, every present
  // file this process does not know unchanged; marks the rest used.
  std::vector<Digest> missing(std::span<const Digest> ids);
  // Writes an artifact's bytes, which the caller read from the authoritative
  // store, once they pass every rule of the format and hash to `id` (Corrupt
  // otherwise; Io when the disk refuses), then trims to the bound sparing
  // `keep`.
  void put(const Digest& id, std::span<const uint8_t> bytes, std::span<const Digest> keep);

  std::string path_of(const Digest& id) const { return store_.path_of(id); }
  // For MappedKv::open: a file this process verified and finds unchanged.
  VouchedFile vouched() const;

  int64_t bytes() const { return bytes_; }
  size_t files() const { return known_.size(); }
  void set_max_bytes(int64_t max_bytes) { max_bytes_ = max_bytes; }

 private:
  struct Known {
    std::optional<FileIdentity> verified;  // as it was when verified or written here
    int64_t bytes = 0;
    uint64_t used = 0;  // 0: never, in this process
  };
  bool trusted(const Digest& id);
  void forget(const Digest& id);
  void trim(std::span<const Digest> keep);

  FileStore store_;
  int64_t max_bytes_;
  std::map<Digest, Known> known_;
  int64_t bytes_ = 0;
  uint64_t clock_ = 0;
};

}  // namespace kvg
