// A small SIMT emulator: compiles kernels/cuda/*.cu as plain C++ and runs
// each launch on the CPU, one fiber per CUDA thread, block after block, with
// real block barriers, warp barriers and shuffles (a deadlock or a shuffle
// with exited lanes aborts). It checks what a machine without a GPU can
// check: every index, stride, tile, barrier and reduction order of the
// kernels and of engine/cuda_forward.cpp. The device's arithmetic is
// modelled by the IEEE operations the _rn intrinsics are defined to be, so
// that part rests on the definition, not on a run (see ../run.sh).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// One block runs at a time, so function-local statics are exactly "shared
// by the threads of this block".
#define __shared__ static
#define __restrict__ __restrict

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3() = default;
  dim3(unsigned a, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint3 {
  unsigned x, y, z;
};
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;

typedef void* cudaStream_t;
typedef int cudaError_t;
enum { cudaSuccess = 0 };
inline cudaError_t cudaGetLastError() { return 0; }

// Built with -ffp-contract=off: each is one IEEE operation, rounded once.
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline float __uint_as_float(uint32_t u) { return std::bit_cast<float>(u); }
inline float __int_as_float(int32_t u) { return std::bit_cast<float>(u); }

namespace simt {
void sync_block();
void sync_warp();
float shfl_down(float v, unsigned delta, int width);
void launch(dim3 grid, dim3 block, const std::function<void()>& body);
}  // namespace simt
inline void __syncthreads() { simt::sync_block(); }
inline void __syncwarp(unsigned = 0xffffffffu) { simt::sync_warp(); }
inline float __shfl_down_sync(unsigned, float v, unsigned delta, int width = 32) {
  return simt::shfl_down(v, delta, width);
}
