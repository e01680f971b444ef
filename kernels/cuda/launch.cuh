// What every kernel file needs to launch on a kvg::cuda::Stream.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/device_memory.hpp"

namespace kvg::cuda::detail {

inline cudaStream_t native(const Stream& stream) { return static_cast<cudaStream_t>(stream.handle()); }

// Launch errors (bad configuration, no kernel image) surface here; errors
// while the kernel runs surface at the next synchronisation.
inline void check_launch(const char* kernel) { check_status(int(cudaGetLastError()), kernel); }

}  // namespace kvg::cuda::detail
