// A small SIMT emulator: compiles kernels/cuda/*.cu as plain C++ and runs
// each launch on the CPU, one fiber per CUDA thread, block after block, with
// real block barriers, warp barriers and shuffles. It is meant to be at
// least as strict as hardware about what a kernel may assume:
//
//   - between two barriers the threads of a block run in a seeded random
//     order (KVG_SIMT_SEED), warps interleaved, and blocks run in a seeded
//     random order, so a missing __syncthreads/__syncwarp shows up as stale
//     or poisoned data instead of passing by lane order;
//   - __shared__ memory is poisoned at the start of every block (0xff or
//     0x7f bytes, chosen by the seed), never zero and never the previous
//     block's values;
//   - every thread of a block must reach the same __syncthreads() call
//     site, none may have exited; __syncwarp and shuffle masks must contain
//     the caller, name no exited lane, and agree between the lanes they
//     name; a shuffle may not read a lane outside its mask; shuffle widths
//     are powers of two up to 32;
//   - a launch is validated as the hardware does (grid and block limits,
//     __launch_bounds__, shared memory per block): a bad one does not run
//     and cudaGetLastError() reports it.
//
// Anything that breaks these rules aborts with a message naming the rule
// (or, for launch errors, returns the CUDA error). The device's arithmetic
// is modelled by the IEEE operations the _rn intrinsics are defined to be,
// so that part rests on the definition, not on a run (see ../run.sh).
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <source_location>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// translate.py rewrites every `__shared__ T name[..];` into a function-local
// static plus a simt::shared_array() call that poisons it per block; one
// left over would be zeroed and shared across blocks, so it does not compile.
#define __shared__ static_assert(false, "__shared__ must be rewritten by translate.py");
#define __restrict__ __restrict
#define __align__(n) alignas(n)

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3() = default;
  constexpr dim3(unsigned a, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint3 {
  unsigned x, y, z;
};
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;
inline constexpr int warpSize = 32;

typedef void* cudaStream_t;
typedef int cudaError_t;
// Real cudaError_t values for what the emulator can report.
enum {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorLaunchOutOfResources = 701,
};

namespace simt {

// What a warp collective does with the values its lanes bring.
enum class WarpOp { Sync, ShflIdx, ShflUp, ShflDown, ShflXor, Ballot };

// Preemption: every few arithmetic intrinsics (a seeded random count) the
// running thread goes back to the scheduler and another ready one runs.
extern int preempt_countdown;
void preempt();
inline void tick() {
  if (--preempt_countdown <= 0) preempt();
}

void sync_block(std::source_location site);
// Every lane in `mask` (which must contain the caller) meets at a warp
// collective; returns the value the operation gives this lane. `arg` is the
// source lane, delta or xor mask; `width` the shuffle segment.
uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int arg, int width, std::source_location site);

// The block's view of a __shared__ array (translate.py inserts the call
// after its declaration): poisoned the first time a thread of a block gets
// here, counted against the block's shared memory.
void shared_array(void* data, size_t bytes);
// extern __shared__ T name[]: the launch's dynamic shared memory, poisoned
// per block.
void* dynamic_shared();

// Runs `body` once per thread of every block (translate.py turns each
// kernel<<<grid, block, shared, stream>>>(args) into this). max_threads is
// the kernel's __launch_bounds__ (0: none).
void launch(dim3 grid, dim3 block, size_t dynamic_shared_bytes, cudaStream_t stream, int max_threads,
            const std::function<void()>& body);

cudaError_t last_error(bool clear);

// For the emulator's own tests: the seed of the scheduler and the poison,
// and barrier sites to drop (a __syncthreads/__syncwarp at a dropped site
// returns at once), to show that removing one changes what a kernel computes.
namespace testing {
struct Site {
  const char* file;
  unsigned line;
  bool operator<(const Site& o) const;
};
uint64_t seed();
void set_seed(uint64_t seed);
// The explicit barrier sites (__syncthreads, __syncwarp) reached since the
// last clear, and those dropped.
void clear_sites_seen();
size_t sites_seen(Site* out, size_t capacity);
void drop_barrier(const Site& site);
void restore_barriers();
}  // namespace testing

template <class T>
uint64_t to_bits(T v) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "shuffles move 4- or 8-byte values");
  if constexpr (sizeof(T) == 4) return std::bit_cast<uint32_t>(v);
  else return std::bit_cast<uint64_t>(v);
}
template <class T>
T from_bits(uint64_t b) {
  if constexpr (sizeof(T) == 4) return std::bit_cast<T>(uint32_t(b));
  else return std::bit_cast<T>(b);
}
template <class T>
T shuffle(WarpOp op, unsigned mask, T v, int arg, int width, std::source_location site) {
  return from_bits<T>(warp_collective(op, mask, to_bits(v), arg, width, site));
}

}  // namespace simt

// Built with -ffp-contract=off: each is one IEEE operation, rounded once.
// Each is also a point where the running thread may be preempted, so that
// threads interleave between barriers at a finer grain than whole phases.
inline float __fmaf_rn(float a, float b, float c) { simt::tick(); return std::fma(a, b, c); }
inline float __fmul_rn(float a, float b) { simt::tick(); return a * b; }
inline float __fadd_rn(float a, float b) { simt::tick(); return a + b; }
inline float __fsub_rn(float a, float b) { simt::tick(); return a - b; }
inline float __fdiv_rn(float a, float b) { simt::tick(); return a / b; }
inline float __fsqrt_rn(float a) { simt::tick(); return std::sqrt(a); }
// Conversions (cvt.rn): round to nearest even, as the default host mode
// does (the emulator never changes it). float -> int saturates and maps NaN
// to 0, as the hardware's cvt.rni.s32.f32 does.
inline float __int2float_rn(int32_t i) { simt::tick(); return float(i); }
inline int32_t __float2int_rn(float f) {
  simt::tick();
  if (f != f) return 0;
  if (f >= 2147483648.0f) return INT32_MAX;
  if (f <= -2147483648.0f) return INT32_MIN;
  return int32_t(std::nearbyint(f));
}
// dp4a: the four byte-wise products of a and b (signed bytes for the int
// overload, unsigned for the unsigned one), summed with c in 32-bit
// arithmetic that wraps (no saturation), as the hardware instruction.
inline int32_t __dp4a(int32_t a, int32_t b, int32_t c) {
  simt::tick();
  uint32_t sum = uint32_t(c);
  for (int i = 0; i < 4; ++i) sum += uint32_t(int32_t(int8_t(uint32_t(a) >> (8 * i))) * int32_t(int8_t(uint32_t(b) >> (8 * i))));
  return int32_t(sum);
}
inline uint32_t __dp4a(uint32_t a, uint32_t b, uint32_t c) {
  simt::tick();
  uint32_t sum = c;
  for (int i = 0; i < 4; ++i) sum += ((a >> (8 * i)) & 0xffu) * ((b >> (8 * i)) & 0xffu);
  return sum;
}
inline float __uint_as_float(uint32_t u) { return std::bit_cast<float>(u); }
inline float __int_as_float(int32_t u) { return std::bit_cast<float>(u); }
inline int32_t __float_as_int(float f) { return std::bit_cast<int32_t>(f); }
inline uint32_t __float_as_uint(float f) { return std::bit_cast<uint32_t>(f); }

inline void __syncthreads(std::source_location site = std::source_location::current()) { simt::sync_block(site); }
inline void __syncwarp(unsigned mask = 0xffffffffu, std::source_location site = std::source_location::current()) {
  simt::warp_collective(simt::WarpOp::Sync, mask, 0, 0, 32, site);
}
template <class T>
T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32,
              std::source_location site = std::source_location::current()) {
  return simt::shuffle(simt::WarpOp::ShflIdx, mask, v, src_lane, width, site);
}
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32,
                 std::source_location site = std::source_location::current()) {
  return simt::shuffle(simt::WarpOp::ShflUp, mask, v, int(delta), width, site);
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32,
                   std::source_location site = std::source_location::current()) {
  return simt::shuffle(simt::WarpOp::ShflDown, mask, v, int(delta), width, site);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32,
                  std::source_location site = std::source_location::current()) {
  return simt::shuffle(simt::WarpOp::ShflXor, mask, v, lane_mask, width, site);
}
inline unsigned __ballot_sync(unsigned mask, int predicate, std::source_location site = std::source_location::current()) {
  return unsigned(simt::warp_collective(simt::WarpOp::Ballot, mask, predicate != 0, 0, 32, site));
}
inline int __any_sync(unsigned mask, int predicate, std::source_location site = std::source_location::current()) {
  return __ballot_sync(mask, predicate, site) != 0;
}
inline int __all_sync(unsigned mask, int predicate, std::source_location site = std::source_location::current()) {
  return __ballot_sync(mask, predicate, site) == mask;
}

inline cudaError_t cudaGetLastError() { return simt::last_error(true); }
inline cudaError_t cudaPeekAtLastError() { return simt::last_error(false); }
