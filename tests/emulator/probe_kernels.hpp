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

// Each dies with the emulator's message.
void shuffle_from_a_lane_outside_the_mask();
void syncwarp_mask_without_the_caller();
void syncthreads_at_two_sites();
void syncthreads_after_some_threads_exited();
void syncwarp_naming_an_exited_lane();
void shared_memory_over_the_limit();

}  // namespace kvg::simt_probe
