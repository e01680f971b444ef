// Which device a call runs on. The extension and the CLI ask here rather than
// the kernels, and Session follows the same answer, so what they report is
// what the forward pass really uses.
//
// Probing for a GPU initialises CUDA in the calling process; it happens only
// when a request is not `cpu` (never at load: see kernels/cuda/cuda_runtime_probe.hpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kvg {

// Auto takes a CUDA device when one is usable and the CPU otherwise; both
// compute the same recipe, so the same bits.
enum class Device { Cpu, Cuda, Auto };

const char* device_name(Device device);  // "cpu", "cuda", "auto"
std::optional<Device> parse_device(std::string_view name);

// Whether this build can run on `device` at all (Cuda: the CUDA kernels were
// compiled in). Never probes the hardware.
bool device_compiled(Device device);

// Whether this process can run on `device` now; `why` (if given) names the
// GPU, or says why it is unusable. Cpu and Auto are always available.
bool device_available(Device device, std::string* why = nullptr);

// What a call asking for `requested` does.
struct DeviceChoice {
  std::optional<Device> runs_on;  // Cpu or Cuda; empty: the call is refused
  std::string detail;             // the GPU's name, or why none is used (empty for cpu)
};
DeviceChoice resolve_device(Device requested);

// A Device::Auto session that resolved to Cuda but runs on the CPU because
// setting up the GPU failed (engine/session.hpp) records why here; the
// extension or CLI may tell the user. last_device_fallback() returns the most
// recent reason in this process and clears it (empty: none since last asked).
void note_device_fallback(const std::string& why);
std::string last_device_fallback();

}  // namespace kvg
