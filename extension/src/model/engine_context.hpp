// The engine as this backend sees it: the model named by kvg.model, loaded on
// first use and kept for the backend's life (weights are mmapped, so backends
// share them through the page cache), and the EngineOptions the kvg.*
// settings ask for. Nothing here touches the GPU until a call asks for it
// (never at load: the library may be loaded into the postmaster, and CUDA does
// not survive fork()).
#pragma once

#include <memory>

#include "engine/device.hpp"
#include "engine/session.hpp"

namespace kvg::pg {

// The model kvg.model names. Reloaded when the setting changes or the file at
// that path is replaced (device, inode, size or mtime differ).
std::shared_ptr<const Model> current_model();

// EngineOptions from kvg.threads and kvg.device.
EngineOptions current_engine_options();
// Where a call would run now, as the engine decides it (resolve_device): cpu,
// cuda, or nothing when kvg.device = cuda has no usable GPU (calls are then
// refused). Probing for a GPU initialises CUDA in this backend, so it is done
// only when kvg.device is not cpu.
DeviceChoice current_device();

}  // namespace kvg::pg
