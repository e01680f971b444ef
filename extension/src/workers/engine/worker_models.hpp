// The models the engine worker computes with, kept by kvg.model path: the
// file at the path now and the ones before it, so that a call is computed
// with the very file its backend loaded and tokenized for, as in backend
// mode, also when another file was renamed over the path (`mv`) since.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/model.hpp"
#include "extension/src/model/model_fingerprints.hpp"
#include "extension/src/workers/protocol/engine_messages.hpp"

namespace kvg::pg::engine_worker {

class WorkerModels {
 public:
  // The model the backend `caller` tokenized `r` for:
  // - one kept here with its fingerprint, weights intact, that is still the
  //   file at the path, or was replaced there and is unchanged itself (held
  //   open: not cut short in place);
  // - else, when the path names another file than the caller loaded, that
  //   file, opened through the descriptor the caller holds it by
  //   (/proc/<caller>/fd/<fd>: the caller loaded it before the rename, and
  //   the worker may never have seen it);
  // - else the file at the path, loaded now (one changed in place is loaded
  //   again), refused when it is not the caller's (ModelMismatch: it changed
  //   between their loads, "call again").
  // Load failures are the backend's own (model_fingerprints::load_setting:
  // 22023 for bytes that are no model).
  std::shared_ptr<const Model> for_request(const worker_protocol::GenerationRequest& r, pid_t caller);

  // The path of the model loaded last ("" before any): kvg_engine_worker's.
  const std::string& last_path() const { return last_path_; }

 private:
  // The file at a path now and the ones before it, for calls whose backends
  // loaded them before they were replaced.
  static constexpr size_t kFilesKeptPerPath = 4;
  std::map<std::string, std::vector<model_fingerprints::HeldModel>> by_path_;
  std::string last_path_;
};

}  // namespace kvg::pg::engine_worker
