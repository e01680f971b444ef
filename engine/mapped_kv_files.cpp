#include "engine/mapped_kv_files.hpp"

#include <unistd.h>

#include <algorithm>

#include "common/error.hpp"
#include "storage/artifact_format.hpp"
#include "storage/byte_stream.hpp"

namespace kvg {

MappedKvFiles::MappedKvFiles(std::string dir, int64_t max_bytes) : store_(std::move(dir)), max_bytes_(max_bytes) {
  for (const Digest& id : store_.list()) {
    const std::optional<FileIdentity> file = identity_at(path_of(id));
    if (!file) continue;
    known_[id] = Known{std::nullopt, int64_t(file->size), 0};
    bytes_ += int64_t(file->size);
  }
}

// Known, verified, and the same file still.
bool MappedKvFiles::trusted(const Digest& id) {
  auto it = known_.find(id);
  if (it == known_.end() || !it->second.verified) return false;
  return identity_at(path_of(id)) == it->second.verified;
}

void MappedKvFiles::forget(const Digest& id) {
  auto it = known_.find(id);
  if (it == known_.end()) return;
  bytes_ -= it->second.bytes;
  known_.erase(it);
}

std::vector<Digest> MappedKvFiles::missing(std::span<const Digest> ids) {
  std::vector<Digest> out;
  for (const Digest& id : ids) {
    if (!trusted(id)) {
      forget(id);
      const std::string path = path_of(id);
      std::optional<FileIdentity> file = identity_at(path);
      bool good = false;
      if (file) {
        // Hashed, every rule of the format checked, as a graft would.
        try {
          FileSource source(path);
          good = verify_artifact(source).identity == id && identity_at(path) == file;
        } catch (const Error&) {
          good = false;
        }
        if (!good) ::unlink(path.c_str());  // not its bytes: rebuilt from the caller's
      }
      if (!good) {
        out.push_back(id);
        continue;
      }
      known_[id] = Known{file, int64_t(file->size), 0};
      bytes_ += int64_t(file->size);
    }
    known_[id].used = ++clock_;
  }
  return out;
}

void MappedKvFiles::put(const Digest& id, std::span<const uint8_t> bytes, std::span<const Digest> keep) {
  // Every rule of the format, canonical compact rows included: once
  // written, the file is mapped without being read through a checker again.
  const Digest identity = verify_artifact(bytes).identity;
  if (identity != id)
    throw Error(ErrorCode::Corrupt, "the bytes supplied for artifact " + to_hex(id) + " hash to " + to_hex(identity));
  forget(id);
  const std::string path = path_of(id);
  ::unlink(path.c_str());  // FileStore keeps a file already there; this one may be damaged
  MemorySource source(bytes);
  store_.put(source);
  const std::optional<FileIdentity> file = identity_at(path);
  if (!file) throw Error(ErrorCode::Io, "artifact file '" + path + "' vanished as it was written");
  known_[id] = Known{file, int64_t(file->size), ++clock_};
  bytes_ += int64_t(file->size);
  trim(keep);
}

void MappedKvFiles::trim(std::span<const Digest> keep) {
  while (bytes_ > max_bytes_) {
    auto oldest = known_.end();
    for (auto it = known_.begin(); it != known_.end(); ++it) {
      if (std::find(keep.begin(), keep.end(), it->first) != keep.end()) continue;
      if (oldest == known_.end() || it->second.used < oldest->second.used) oldest = it;
    }
    if (oldest == known_.end()) return;  // all kept: the chain in hand is larger than the bound
    ::unlink(path_of(oldest->first).c_str());
    forget(oldest->first);
  }
}

VouchedFile MappedKvFiles::vouched() const {
  return [this](const Digest& id, const FileIdentity& file) {
    auto it = known_.find(id);
    return it != known_.end() && it->second.verified == file;
  };
}

}  // namespace kvg
