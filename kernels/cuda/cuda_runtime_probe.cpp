// Built into kvg_kernels in every configuration, so the answer "no CUDA in
// this build" needs no CUDA toolkit; with KVG_HAVE_CUDA it forwards to the
// probe compiled by nvcc (device_probe.cu).
#include "kernels/cuda/cuda_runtime_probe.hpp"

#include <mutex>

namespace kvg {

#ifdef KVG_HAVE_CUDA
namespace cuda::detail {
bool probe_device(std::string* why);
}
#endif

bool cuda_compiled() {
#ifdef KVG_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

namespace {
std::mutex unusable_mutex;
bool unusable = false;
std::string unusable_reason;
}  // namespace

void cuda_mark_unusable(const std::string& why) {
  std::lock_guard<std::mutex> lock(unusable_mutex);
  if (unusable) return;
  unusable = true;
  unusable_reason = why;
}

void detail::cuda_forget_unusable_for_tests() {
  std::lock_guard<std::mutex> lock(unusable_mutex);
  unusable = false;
  unusable_reason.clear();
}

bool cuda_device_available(std::string* why) {
#ifdef KVG_HAVE_CUDA
  {
    std::lock_guard<std::mutex> lock(unusable_mutex);
    if (unusable) {
      if (why)
        *why = "the CUDA device failed earlier in this process and is no longer used by it (" + unusable_reason +
               "); a new connection starts a fresh process";
      return false;
    }
  }
  // Probed once: initialising CUDA and launching a test kernel costs tens of
  // milliseconds, and the answer cannot change within a process.
  static std::once_flag once;
  static bool available = false;
  static std::string reason;
  std::call_once(once, [] { available = cuda::detail::probe_device(&reason); });
  if (why) *why = reason;
  return available;
#else
  if (why) *why = "this build has no CUDA support (configure with -DKVG_CUDA=ON and nvcc)";
  return false;
#endif
}

}  // namespace kvg
