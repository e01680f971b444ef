// A content-addressed directory: <dir>/<first 2 hex>/<64 hex>.kvga.
// Writes are atomic (temp file in <dir>, fsync, rename, fsync directory), so a
// reader never sees a partial object and a crash leaves at most a temp file
// (".tmp-*") in <dir>. Every read is hash-verified.
#pragma once

#include <string>

#include "storage/artifact_store.hpp"

namespace kvg {

class FileStore final : public ArtifactStore {
 public:
  // Creates `dir` if needed (Io on failure).
  explicit FileStore(std::string dir);

  // Streams `src` (constant memory) into the store. Safe against concurrent
  // writers of the same content in other threads and processes.
  Digest put(ByteSource& src) override;
  std::unique_ptr<ByteSource> get(const Digest& id) override;
  std::unique_ptr<ByteSource> get_unverified(const Digest& id) override;
  bool exists(const Digest& id) override;
  std::vector<Digest> list() override;

  const std::string& dir() const { return dir_; }
  std::string path_of(const Digest& id) const;

 private:
  std::string dir_;
};

}  // namespace kvg
