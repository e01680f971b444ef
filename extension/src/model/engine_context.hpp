// The engine as this backend sees it: the model named by kvg.model, loaded on
// first use and kept for the backend's life (weights are mmapped, so backends
// share them through the page cache), and the EngineOptions the kvg.*
// settings ask for. Nothing here touches the GPU until a call asks for it
// (never at load: the library may be loaded into the postmaster, and CUDA does
// not survive fork()).
#pragma once

#include <memory>
#include <optional>

#include "engine/device.hpp"
#include "engine/session.hpp"
#include "extension/src/model/model_fingerprints.hpp"

namespace kvg::pg {

using model_fingerprints::ModelUse;

// The model kvg.model names. Reloaded when the setting changes or the file at
// that path is replaced (device, inode, size or mtime differ). For
// ModelUse::Prepare it is loaded without its weights, so that a backend
// whose calls compute in the engine worker maps no model file; one already
// loaded with them serves both uses (a Compute call ran in this backend).
std::shared_ptr<const Model> current_model(ModelUse use);

// The file `model` (current_model's) was loaded from, and the descriptor
// this backend holds it open by for as long as it keeps the model: a call
// the engine worker serves is computed with that file, also once another
// was renamed over kvg.model's path (the worker opens it through
// /proc/<this backend>/fd/<fd>). Nothing for another model.
struct HeldModelFile {
  model_fingerprints::FileIdentity file;
  int fd;
};
std::optional<HeldModelFile> held_file_of(const Model& model);

// EngineOptions from kvg.threads and kvg.device.
EngineOptions current_engine_options();
// Where a call would run now, as the engine decides it (resolve_device): cpu,
// cuda, or nothing when kvg.device = cuda has no usable GPU (calls are then
// refused). Probing for a GPU initialises CUDA in this backend, so it is done
// only when kvg.device is not cpu.
DeviceChoice current_device();

}  // namespace kvg::pg
