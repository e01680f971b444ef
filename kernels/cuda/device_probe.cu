// Finds out whether this process can run the kernels: a driver, a device,
// and code for its architecture (checked by launching a kernel, which is the
// only test that cannot be fooled by a partial install).
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/signal_block.hpp"

namespace kvg::cuda::detail {

namespace {

__global__ void probe_kernel(int* out) { *out = 0x6b7667; }  // "kvg"

std::string describe(cudaError_t e, const char* what) {
  std::string s = std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice)
    s += "; is the NVIDIA driver installed and a GPU visible (nvidia-smi, CUDA_VISIBLE_DEVICES)?";
  if (e == cudaErrorNoKernelImageForDevice || e == cudaErrorUnsupportedPtxVersion)
    s += "; this build has code for sm_80 and sm_90 (and PTX for compute_90) only";
  return s;
}

}  // namespace

bool probe_device(std::string* why) {
  // CUDA initialises here and starts its driver threads: they inherit this
  // mask, so PostgreSQL's signal handlers never run on them.
  const SignalBlock no_signals;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    *why = describe(e, "no usable CUDA driver");
    cudaGetLastError();
    return false;
  }
  if (count == 0) {
    *why = "the CUDA driver reports no device";
    return false;
  }
  // Before the context exists (the cudaMalloc below creates it): a thread
  // waiting in cudaStreamSynchronize sleeps on an OS primitive instead of
  // spinning a core, which on a database server belongs to other backends.
  // Failure only costs CPU time, never correctness, so it is not fatal.
  if (cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync) != cudaSuccess) cudaGetLastError();
  int* flag = nullptr;
  if ((e = cudaMalloc(&flag, sizeof(int))) != cudaSuccess) {
    *why = describe(e, "cannot allocate device memory");
    cudaGetLastError();
    return false;
  }
  probe_kernel<<<1, 1>>>(flag);
  int value = 0;
  e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaMemcpy(&value, flag, sizeof(int), cudaMemcpyDeviceToHost);
  cudaFree(flag);
  if (e != cudaSuccess || value != 0x6b7667) {
    *why = e != cudaSuccess ? describe(e, "cannot run a kernel on the device") : "a test kernel ran but wrote nothing";
    cudaGetLastError();
    return false;
  }
  cudaDeviceProp prop{};
  int device = 0;
  cudaGetDevice(&device);
  cudaGetDeviceProperties(&prop, device);
  *why = std::string("CUDA device ") + std::to_string(device) + ": " + prop.name + " (sm_" +
         std::to_string(prop.major) + std::to_string(prop.minor) + ")";
  return true;
}

}  // namespace kvg::cuda::detail
