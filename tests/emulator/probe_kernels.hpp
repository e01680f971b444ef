// Small kernels that break one rule each, for the SIMT emulator's own tests
// (test_emulator.cpp): each probe launches on the emulator and returns what
// the threads saw, or dies with the emulator's message. Emulator only.
#pragma once

#include <cstdint>
#include <vector>

namespace kvg::simt_probe {

// Every thread of every block reads its __shared__ slot before writing it.
std::vector<uint32_t> read_shared_before_writing(int blocks, int threads);
// The order in which the threads of one block first ran (a counter each
// thread takes on entry).
std::vector<int> first_run_order(int threads);
// A launch with this configuration, of a kernel declared
// __launch_bounds__(128) that uses `dynamic_shared` bytes; returns
// cudaGetLastError() right after it, and sets *ran if any thread ran.
int launch_status(unsigned grid_x, unsigned block_x, unsigned block_y, unsigned dynamic_shared, bool* ran);
// Block sum with a __syncthreads between writing and reading the partial
// sums; `with_barrier` false is the same kernel missing it.
std::vector<float> block_sums(const std::vector<float>& x, bool with_barrier);

// The integer intrinsics of the q8 kernels, one thread per element:
// __dp4a (signed and unsigned) of a[i], b[i], c[i]; __float2int_rn(x[i]);
// __int2float_rn(i[i]).
std::vector<int32_t> dp4a_signed(const std::vector<int32_t>& a, const std::vector<int32_t>& b,
                                 const std::vector<int32_t>& c);
std::vector<uint32_t> dp4a_unsigned(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b,
                                    const std::vector<uint32_t>& c);
std::vector<int32_t> float2int_rn(const std::vector<float>& x);
std::vector<float> int2float_rn(const std::vector<int32_t>& i);
// How many of 64 threads were preempted (another thread ran) while calling
// an intrinsic 200 times in a row: `which` 0 = __dp4a, 1 = unsigned __dp4a,
// 2 = __float2int_rn, 3 = __int2float_rn, 4 = plain integer arithmetic (no
// intrinsic: never preempted).
int preempted_threads(int which);

// Each dies with the emulator's message.
void shuffle_from_a_lane_outside_the_mask();
void syncwarp_mask_without_the_caller();
void syncthreads_at_two_sites();
void syncthreads_after_some_threads_exited();
void syncwarp_naming_an_exited_lane();
void shared_memory_over_the_limit();

}  // namespace kvg::simt_probe
