// Probes of the SIMT emulator's rules (see probe_kernels.hpp). Written as
// CUDA source and translated like kernels/cuda/*.cu, so they go through the
// same translate.py rewrites as the real kernels.
#include "tests/emulator/probe_kernels.hpp"

#include <cuda_runtime.h>

namespace kvg::simt_probe {
namespace {

__global__ void read_shared_kernel(uint32_t* out) {
  __shared__ float slot[256];
  uint32_t bits;
  std::memcpy(&bits, &slot[threadIdx.x], 4);
  out[blockIdx.x * blockDim.x + threadIdx.x] = bits;
  slot[threadIdx.x] = 1.0f;  // a block that saw this would read 0x3f800000
}

__global__ void order_kernel(int* out, int* counter) { out[threadIdx.x] = (*counter)++; }

__global__ void __launch_bounds__(128) bounded_kernel(bool* ran) { *ran = true; }

__global__ void block_sum_kernel(const float* x, float* out, bool with_barrier) {
  __shared__ float part[64];
  part[threadIdx.x] = x[blockIdx.x * 64 + threadIdx.x];
  if (with_barrier) __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.0f;
    for (int i = 0; i < 64; ++i) s = __fadd_rn(s, part[i]);
    out[blockIdx.x] = s;
  }
}

__global__ void bad_shuffle_kernel(float* out) {
  if (threadIdx.x < 16) out[threadIdx.x] = __shfl_down_sync(0x0000ffffu, 1.0f, 8);  // lane 8+8 is outside
}
__global__ void bad_mask_kernel() { __syncwarp(0x1u << ((threadIdx.x + 1) % 32)); }
__global__ void two_sites_kernel() {
  if (threadIdx.x < 32) __syncthreads();
  else __syncthreads();
}
__global__ void exited_kernel() {
  if (threadIdx.x >= 32) return;
  __syncthreads();
}
__global__ void exited_lane_kernel() {
  if (threadIdx.x % 32 == 5) return;
  __syncwarp();
}
__global__ void big_shared_kernel(float* out) {
  __shared__ float big[16 * 1024];  // 64 KiB
  big[threadIdx.x] = 0.0f;
  out[0] = big[0];
}

__global__ void dp4a_signed_kernel(const int32_t* a, const int32_t* b, const int32_t* c, int32_t* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __dp4a(a[i], b[i], c[i]);
}
__global__ void dp4a_unsigned_kernel(const uint32_t* a, const uint32_t* b, const uint32_t* c, uint32_t* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __dp4a(a[i], b[i], c[i]);
}
__global__ void float2int_kernel(const float* x, int32_t* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2int_rn(x[i]);
}
__global__ void int2float_kernel(const int32_t* x, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __int2float_rn(x[i]);
}
__global__ void preempt_kernel(int which, int* counter, int* preempted, int* sink) {
  const int before = (*counter)++;
  int acc = int(threadIdx.x);
  for (int i = 0; i < 200; ++i) {
    switch (which) {
      case 0: acc = __dp4a(acc, 0x01010101, 1); break;
      case 1: acc = int(__dp4a(uint32_t(acc), 0x01010101u, 1u)); break;
      case 2: acc += __float2int_rn(float(i) + 0.5f); break;
      case 3: acc += int(__int2float_rn(i)); break;
      default: acc = acc * 3 + i; break;
    }
  }
  const int after = (*counter)++;
  if (after != before + 1) ++*preempted;
  sink[threadIdx.x] = acc;
}

}  // namespace

std::vector<int32_t> dp4a_signed(const std::vector<int32_t>& a, const std::vector<int32_t>& b,
                                 const std::vector<int32_t>& c) {
  std::vector<int32_t> out(a.size());
  dp4a_signed_kernel<<<unsigned(a.size() + 31) / 32, 32>>>(a.data(), b.data(), c.data(), out.data(), int(a.size()));
  return out;
}
std::vector<uint32_t> dp4a_unsigned(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b,
                                    const std::vector<uint32_t>& c) {
  std::vector<uint32_t> out(a.size());
  dp4a_unsigned_kernel<<<unsigned(a.size() + 31) / 32, 32>>>(a.data(), b.data(), c.data(), out.data(), int(a.size()));
  return out;
}
std::vector<int32_t> float2int_rn(const std::vector<float>& x) {
  std::vector<int32_t> out(x.size());
  float2int_kernel<<<unsigned(x.size() + 31) / 32, 32>>>(x.data(), out.data(), int(x.size()));
  return out;
}
std::vector<float> int2float_rn(const std::vector<int32_t>& x) {
  std::vector<float> out(x.size());
  int2float_kernel<<<unsigned(x.size() + 31) / 32, 32>>>(x.data(), out.data(), int(x.size()));
  return out;
}
int preempted_threads(int which) {
  int counter = 0, preempted = 0;
  std::vector<int> sink(64);
  preempt_kernel<<<1, 64>>>(which, &counter, &preempted, sink.data());
  return preempted;
}

std::vector<uint32_t> read_shared_before_writing(int blocks, int threads) {
  std::vector<uint32_t> out(size_t(blocks * threads));
  read_shared_kernel<<<blocks, threads>>>(out.data());
  return out;
}

std::vector<int> first_run_order(int threads) {
  std::vector<int> out(static_cast<size_t>(threads));
  int counter = 0;
  order_kernel<<<1, threads>>>(out.data(), &counter);
  return out;
}

int launch_status(unsigned grid_x, unsigned block_x, unsigned block_y, unsigned dynamic_shared, bool* ran) {
  *ran = false;
  bounded_kernel<<<dim3(grid_x), dim3(block_x, block_y), dynamic_shared>>>(ran);
  return cudaGetLastError();
}

std::vector<float> block_sums(const std::vector<float>& x, bool with_barrier) {
  std::vector<float> out(x.size() / 64);
  block_sum_kernel<<<unsigned(out.size()), 64>>>(x.data(), out.data(), with_barrier);
  return out;
}

void shuffle_from_a_lane_outside_the_mask() {
  float out[32];
  bad_shuffle_kernel<<<1, 32>>>(out);
}
void syncwarp_mask_without_the_caller() { bad_mask_kernel<<<1, 32>>>(); }
void syncthreads_at_two_sites() { two_sites_kernel<<<1, 64>>>(); }
void syncthreads_after_some_threads_exited() { exited_kernel<<<1, 64>>>(); }
void syncwarp_naming_an_exited_lane() { exited_lane_kernel<<<1, 32>>>(); }
void shared_memory_over_the_limit() {
  float out[1];
  big_shared_kernel<<<1, 32>>>(out);
}

}  // namespace kvg::simt_probe
