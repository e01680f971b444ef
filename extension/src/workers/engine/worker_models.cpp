#include "extension/src/workers/engine/worker_models.hpp"

#include <algorithm>
#include <optional>

#include "common/error.hpp"

namespace kvg::pg::engine_worker {

namespace {

using model_fingerprints::FileIdentity;
using model_fingerprints::HeldModel;

// The identity of the file the caller loaded (ctime left out, as for every
// model file: model_fingerprints.cpp).
FileIdentity callers_file(const worker_protocol::GenerationRequest::ModelFile& f) {
  FileIdentity file;
  file.device = dev_t(f.device);
  file.inode = ino_t(f.inode);
  file.size = off_t(f.size);
  file.mtime_ns = f.mtime_ns;
  return file;
}

}  // namespace

std::shared_ptr<const Model> WorkerModels::for_request(const worker_protocol::GenerationRequest& r, pid_t caller) {
  const FileIdentity file = model_fingerprints::identify(r.model_path);
  auto same_inode = [](const FileIdentity& a, const FileIdentity& b) {
    return a.device == b.device && a.inode == b.inode;
  };
  std::vector<HeldModel>& kept = by_path_[r.model_path];
  for (const HeldModel& m : kept)
    if (m.model->fingerprint() == r.model_fingerprint && m.model->weights_intact() &&
        (m.file == file || (!same_inode(m.file, file) && m.held->unchanged())))
      return m.model;
  const FileIdentity theirs = callers_file(r.model_file);
  std::optional<HeldModel> loaded;
  if (!same_inode(theirs, file)) loaded = model_fingerprints::load_held_by(caller, r.model_file.fd, theirs,
                                                                             model_fingerprints::ModelUse::Compute);
  if (!loaded) {
    // Unmapped before the file is mapped again: this inode changed in
    // place, or its mapping failed a read.
    std::erase_if(kept, [&](const HeldModel& m) { return same_inode(m.file, file); });
    loaded = model_fingerprints::load_held(r.model_path, model_fingerprints::ModelUse::Compute);
  } else {
    std::erase_if(kept, [&](const HeldModel& m) { return same_inode(m.file, theirs); });
  }
  const std::shared_ptr<const Model> model = loaded->model;
  kept.push_back(std::move(*loaded));
  if (kept.size() > kFilesKeptPerPath) kept.erase(kept.begin());
  last_path_ = r.model_path;
  if (model->fingerprint() != r.model_fingerprint)
    throw Error(ErrorCode::ModelMismatch, "kvg.model '" + r.model_path +
                                              "' is not the same file in the engine worker as in the caller's "
                                              "backend (it changed between their loads): call again");
  return model;
}

}  // namespace kvg::pg::engine_worker
