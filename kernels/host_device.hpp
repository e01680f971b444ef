// KVG_HOST_DEVICE marks small inline helpers that the CPU kernels and the
// CUDA kernels share verbatim (plain `inline` outside nvcc).
#pragma once

#if defined(__CUDACC__)
#define KVG_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define KVG_HOST_DEVICE inline
#endif
