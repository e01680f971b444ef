#include "engine/device.hpp"

#include <mutex>
#include <utility>

#include "kernels/cuda/cuda_runtime_probe.hpp"

namespace kvg {

const char* device_name(Device device) {
  switch (device) {
    case Device::Cpu: return "cpu";
    case Device::Cuda: return "cuda";
    case Device::Auto: return "auto";
  }
  return "?";
}

std::optional<Device> parse_device(std::string_view name) {
  for (Device d : {Device::Cpu, Device::Cuda, Device::Auto})
    if (name == device_name(d)) return d;
  return std::nullopt;
}

bool device_compiled(Device device) { return device != Device::Cuda || cuda_compiled(); }

bool device_available(Device device, std::string* why) {
  if (device == Device::Cuda) return cuda_device_available(why);
  if (why) why->clear();
  return true;
}

namespace {
std::mutex fallback_mutex;
std::string fallback_reason;
}  // namespace

void note_device_fallback(const std::string& why) {
  std::lock_guard<std::mutex> lock(fallback_mutex);
  fallback_reason = why;
}

std::string last_device_fallback() {
  std::lock_guard<std::mutex> lock(fallback_mutex);
  return std::exchange(fallback_reason, {});
}

DeviceChoice resolve_device(Device requested) {
  DeviceChoice choice;
  switch (requested) {
    case Device::Cpu:
      choice.runs_on = Device::Cpu;
      break;
    case Device::Cuda:
      // No silent fallback: whoever asked for the GPU wants to know it is not there.
      if (cuda_device_available(&choice.detail)) choice.runs_on = Device::Cuda;
      break;
    case Device::Auto: {
      const bool gpu = cuda_device_available(&choice.detail);
      choice.runs_on = gpu ? Device::Cuda : Device::Cpu;
      break;
    }
  }
  return choice;
}

}  // namespace kvg
