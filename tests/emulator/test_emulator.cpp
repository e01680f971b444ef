// The SIMT emulator's own rules (kernels/cuda/emulator/include/simt.hpp and
// mock_runtime.cpp), so that "passes under the emulator" means something:
// shared memory poisoned per block, threads in a seeded random order, masks
// and barrier sites checked, launch limits enforced and reported through
// cudaGetLastError, asynchronous copies landing only at synchronize(). And
// the proof that matters most: removing any one barrier of the real kernels
// (attention, matmul, rmsnorm) changes what they compute, so the emulator
// would have caught it. Built and run only by kernels/cuda/emulator/run.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <bit>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/device_memory.hpp"
#include "kernels/cuda/emulator/include/mock_control.hpp"
#include "kernels/cuda/emulator/include/simt.hpp"
#include "kernels/cuda/matmul.hpp"
#include "kernels/cuda/matmul_q8.hpp"
#include "kernels/cuda/ops.hpp"
#include "tests/emulator/probe_kernels.hpp"

namespace kvg {
namespace {

using simt::testing::Site;

bool poison(uint32_t bits) { return bits == 0xffffffffu || bits == 0x7f7f7f7fu; }

std::vector<uint32_t> bits_of(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * 4);
  return b;
}

TEST(EmulatorRules, SharedMemoryIsPoisonedAtTheStartOfEveryBlock) {
  const auto seen = simt_probe::read_shared_before_writing(3, 64);
  for (size_t i = 0; i < seen.size(); ++i) ASSERT_TRUE(poison(seen[i])) << "thread " << i << " read " << seen[i];
}

TEST(EmulatorRules, ThreadsOfABlockRunInASeededRandomOrder) {
  const uint64_t seed = simt::testing::seed();
  simt::testing::set_seed(12345);
  const auto a = simt_probe::first_run_order(128);
  simt::testing::set_seed(12345);
  const auto b = simt_probe::first_run_order(128);
  simt::testing::set_seed(54321);
  const auto c = simt_probe::first_run_order(128);
  simt::testing::set_seed(seed);
  EXPECT_EQ(a, b) << "one seed, one order";
  EXPECT_NE(a, c) << "another seed, another order";
  std::vector<int> lane_order(128);
  for (int i = 0; i < 128; ++i) lane_order[size_t(i)] = i;
  EXPECT_NE(a, lane_order) << "not lane order";
  // Warps interleave: the first 32 to run are not one warp.
  std::vector<int> first_warp_of;
  for (int t = 0; t < 128; ++t)
    if (a[size_t(t)] < 32) first_warp_of.push_back(t / 32);
  EXPECT_GT(std::count_if(first_warp_of.begin(), first_warp_of.end(), [&](int w) { return w != first_warp_of[0]; }), 0);
}

TEST(EmulatorRules, LaunchLimitsAreReportedByCudaGetLastError) {
  bool ran = false;
  EXPECT_EQ(simt_probe::launch_status(2, 128, 1, 0, &ran), cudaSuccess);
  EXPECT_TRUE(ran);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "read once, then clear";
  struct Case { unsigned grid, block_x, block_y, shared; int status; const char* what; };
  const Case bad[] = {{1, 2048, 1, 0, cudaErrorInvalidConfiguration, "more than 1024 threads"},
                      {1, 64, 32, 0, cudaErrorInvalidConfiguration, "2048 threads in two dimensions"},
                      {0, 32, 1, 0, cudaErrorInvalidConfiguration, "an empty grid"},
                      {1, 256, 1, 0, cudaErrorLaunchOutOfResources, "more threads than __launch_bounds__(128)"},
                      {1, 32, 1, 64 * 1024, cudaErrorInvalidValue, "64 KiB of dynamic shared memory"}};
  for (const Case& c : bad) {
    EXPECT_EQ(simt_probe::launch_status(c.grid, c.block_x, c.block_y, c.shared, &ran), c.status) << c.what;
    EXPECT_FALSE(ran) << c.what << ": a refused launch runs nothing";
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << c.what;
  }
}

TEST(EmulatorRules, AMissingBarrierInAToyKernelIsCaught) {
  std::vector<float> x(64 * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 7) + 0.5f;
  const auto good = simt_probe::block_sums(x, true);
  const auto racy = simt_probe::block_sums(x, false);
  EXPECT_NE(std::memcmp(good.data(), racy.data(), good.size() * 4), 0);
}

// The integer intrinsics of the q8 kernels, against values worked out by
// hand from the instructions' definitions (PTX dp4a, cvt.rni.s32.f32,
// cvt.rn.f32.s32).
int32_t bytes(int b0, int b1, int b2, int b3) {  // four int8 lanes, b0 lowest
  return int32_t(uint32_t(uint8_t(b0)) | uint32_t(uint8_t(b1)) << 8 | uint32_t(uint8_t(b2)) << 16 |
                 uint32_t(uint8_t(b3)) << 24);
}

TEST(EmulatorIntrinsics, Dp4aSumsFourSignedByteProductsIntoInt32WithoutSaturation) {
  struct Case { int32_t a, b, c, expected; const char* what; };
  const Case cases[] = {
      {bytes(1, -2, 3, -4), bytes(5, 6, -7, 8), 0, 5 - 12 - 21 - 32, "signed lanes"},
      {bytes(1, 2, 3, 4), bytes(1, 1, 1, 1), 1000, 1010, "plus c"},
      {bytes(-128, -128, -128, -128), bytes(-128, -128, -128, -128), 0, 4 * 16384, "-128 * -128"},
      {bytes(-128, 127, -128, 127), bytes(127, -128, 127, -128), -5, 4 * -16256 - 5, "the extremes"},
      {bytes(127, 0, 0, 0), bytes(127, 0, 0, 0), INT32_MAX, int32_t(uint32_t(INT32_MAX) + 16129u), "wraps, no saturation"},
      {bytes(-128, 0, 0, 0), bytes(127, 0, 0, 0), INT32_MIN, int32_t(uint32_t(INT32_MIN) - 16256u), "wraps downwards"},
      {bytes(0, 0, 0, 9), bytes(0, 0, 0, -3), 0, -27, "lane 3 pairs with lane 3 only"},
  };
  std::vector<int32_t> a, b, c;
  for (const Case& k : cases) a.push_back(k.a), b.push_back(k.b), c.push_back(k.c);
  const auto out = simt_probe::dp4a_signed(a, b, c);
  for (size_t i = 0; i < std::size(cases); ++i) EXPECT_EQ(out[i], cases[i].expected) << cases[i].what;
}

TEST(EmulatorIntrinsics, UnsignedDp4aSumsFourUnsignedByteProducts) {
  const std::vector<uint32_t> a = {0xffffffffu, 0x01020304u, 0x000000ffu, 0xff000000u};
  const std::vector<uint32_t> b = {0xffffffffu, 0x01010101u, 0x00000002u, 0x01000000u};
  const std::vector<uint32_t> c = {0, 7, 0xffffffffu, 1};
  const auto out = simt_probe::dp4a_unsigned(a, b, c);
  EXPECT_EQ(out[0], 4u * 255u * 255u);
  EXPECT_EQ(out[1], 1u + 2u + 3u + 4u + 7u);
  EXPECT_EQ(out[2], 509u) << "0xffffffff + 510 wraps";
  EXPECT_EQ(out[3], 256u);
}

TEST(EmulatorIntrinsics, Float2IntRnRoundsToNearestEvenAndSaturates) {
  const std::vector<float> x = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, 127.5f, -127.5f, 0.49999997f,
                                8388609.0f, 1e-45f, -0.0f, 3e9f, -3e9f, 2147483520.0f, NAN, INFINITY, -INFINITY};
  const std::vector<int32_t> expected = {0, 2, 2, 0, -2, -2, 126, 128, -128, 0, 8388609, 0, 0, INT32_MAX, INT32_MIN,
                                         2147483520, 0, INT32_MAX, INT32_MIN};
  EXPECT_EQ(simt_probe::float2int_rn(x), expected);
}

TEST(EmulatorIntrinsics, Int2FloatRnRoundsToNearestEven) {
  const std::vector<int32_t> i = {0, -7, 16777216, 16777217, 16777219, -16777217, INT32_MAX, INT32_MIN, 33554435};
  const std::vector<float> expected = {0.0f, -7.0f, 16777216.0f, 16777216.0f, 16777220.0f, -16777216.0f,
                                       2147483648.0f, -2147483648.0f, 33554436.0f};
  const auto out = simt_probe::int2float_rn(i);
  EXPECT_EQ(bits_of(out), bits_of(expected));
}

TEST(EmulatorIntrinsics, EveryQ8IntrinsicIsAPreemptionPoint) {
  const char* names[] = {"__dp4a", "unsigned __dp4a", "__float2int_rn", "__int2float_rn"};
  for (int which = 0; which < 4; ++which)
    EXPECT_GT(simt_probe::preempted_threads(which), 0) << names[which] << " never let another thread run";
  EXPECT_EQ(simt_probe::preempted_threads(4), 0) << "plain integer arithmetic is no preemption point";
}

class EmulatorDeath : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(EmulatorDeath, ShuffleFromALaneOutsideTheMask) {
  EXPECT_DEATH(simt_probe::shuffle_from_a_lane_outside_the_mask(), "not in the mask");
}
TEST_F(EmulatorDeath, SyncwarpMaskWithoutTheCaller) {
  EXPECT_DEATH(simt_probe::syncwarp_mask_without_the_caller(), "does not contain itself");
}
TEST_F(EmulatorDeath, SyncthreadsAtTwoSites) {
  EXPECT_DEATH(simt_probe::syncthreads_at_two_sites(), "different __syncthreads");
}
TEST_F(EmulatorDeath, SyncthreadsAfterSomeThreadsExited) {
  EXPECT_DEATH(simt_probe::syncthreads_after_some_threads_exited(), "exited");
}
TEST_F(EmulatorDeath, SyncwarpNamingAnExitedLane) {
  EXPECT_DEATH(simt_probe::syncwarp_naming_an_exited_lane(), "lane 5, which has exited");
}
TEST_F(EmulatorDeath, SharedMemoryOverTheLimit) {
  EXPECT_DEATH(simt_probe::shared_memory_over_the_limit(), "limit per block");
}

// ---------------------------------------------------------------------------
// The runtime: pinned memory and copies in flight.

TEST(EmulatorRuntime, PinnedMemoryIsNotMallocMemory) {
  cuda::PinnedBuffer pinned;
  pinned.fit(4096);
  std::vector<char> pageable(4096);
  cuda::DeviceBuffer device(4096);
  EXPECT_TRUE(cuda::mock::is_pinned(pinned.data(), 4096));
  EXPECT_FALSE(cuda::mock::is_pinned(pinned.data(), 4097));
  EXPECT_FALSE(cuda::mock::is_pinned(pageable.data(), 1));
  EXPECT_TRUE(cuda::mock::is_device(device.data(), 4096));
  EXPECT_FALSE(cuda::mock::is_device(pinned.data(), 1));
}

TEST(EmulatorRuntime, ACopyIntoPinnedMemoryLandsOnlyAtSynchronize) {
  cuda::Stream stream;
  cuda::DeviceBuffer device(256 * 4);
  std::vector<float> values(256);
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(i);
  cuda::copy_to_device(device.data(), values.data(), 256 * 4, stream);
  cuda::PinnedBuffer pinned;
  pinned.fit(256 * 4);
  cuda::copy_to_host(pinned.data(), device.data(), 256 * 4, stream);
  for (int i = 0; i < 256; ++i) ASSERT_TRUE(poison(pinned.as<uint32_t>()[i])) << "in flight: " << i;
  stream.synchronize();
  EXPECT_EQ(std::memcmp(pinned.data(), values.data(), 256 * 4), 0);
  // Pageable memory: the call returns when the copy is done, as CUDA says.
  std::vector<float> pageable(256);
  cuda::copy_to_host(pageable.data(), device.data(), 256 * 4, stream);
  EXPECT_EQ(pageable, values);
}

void change_a_pinned_source_before_synchronize() {
  cuda::Stream stream;
  cuda::DeviceBuffer device(64);
  cuda::PinnedBuffer pinned;
  pinned.fit(64);
  std::memset(pinned.data(), 1, 64);
  cuda::copy_to_device(device.data(), pinned.data(), 64, stream);
  std::memset(pinned.data(), 2, 64);  // the copy engine may not have read it yet
  stream.synchronize();
}
void free_pinned_memory_under_a_copy() {
  cuda::Stream stream;
  cuda::DeviceBuffer device(64);
  cuda::PinnedBuffer pinned;
  pinned.fit(64);
  cuda::copy_to_host(pinned.data(), device.data(), 64, stream);
  pinned.fit(128);  // frees the old buffer: the copy still owes it 64 bytes
}
void give_a_host_pointer_as_device_memory() {
  cuda::Stream stream;
  std::vector<char> a(64), b(64);
  cuda::copy_to_device(a.data(), b.data(), 64, stream);
}

TEST_F(EmulatorDeath, APinnedSourceChangedBeforeSynchronize) {
  EXPECT_DEATH(change_a_pinned_source_before_synchronize(), "changed while an asynchronous copy");
}
TEST_F(EmulatorDeath, PinnedMemoryFreedUnderACopy) {
  EXPECT_DEATH(free_pinned_memory_under_a_copy(), "freed while an asynchronous copy");
}
TEST_F(EmulatorDeath, AHostPointerGivenAsDeviceMemory) {
  EXPECT_DEATH(give_a_host_pointer_as_device_memory(), "not inside one device allocation");
}

// ---------------------------------------------------------------------------
// Removing any one barrier of a real kernel changes its output.

struct Noise {
  uint64_t state;
  float next() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return float(int32_t(state >> 33) % 2001) / 1000.0f;
  }
  std::vector<float> values(size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = next();
    return v;
  }
};

template <class T>
cuda::DeviceBuffer upload(const std::vector<T>& v, const cuda::Stream& stream) {
  cuda::DeviceBuffer b(v.size() * sizeof(T));
  cuda::copy_to_device(b.data(), v.data(), v.size() * sizeof(T), stream);
  return b;
}
std::vector<float> download(const cuda::DeviceBuffer& b, size_t n, const cuda::Stream& stream) {
  std::vector<float> v(n);
  cuda::copy_to_host(v.data(), b.data(), n * 4, stream);
  stream.synchronize();
  return v;
}

// Runs `kernel` intact, then once with each of its barrier sites in `file`
// dropped; every run without a barrier must compute other bits. Returns the
// number of sites.
size_t expect_every_barrier_matters(const std::string& file, const std::function<std::vector<float>()>& kernel) {
  simt::testing::restore_barriers();
  simt::testing::clear_sites_seen();
  const auto intact = bits_of(kernel());
  std::vector<Site> all(64);
  all.resize(std::min<size_t>(simt::testing::sites_seen(all.data(), all.size()), all.size()));
  std::vector<Site> sites;
  for (const Site& s : all)
    if (std::string(s.file).ends_with(file)) sites.push_back(s);
  for (const Site& s : sites) {
    simt::testing::drop_barrier(s);
    const auto without = bits_of(kernel());
    simt::testing::restore_barriers();
    EXPECT_NE(without, intact) << "without the barrier at " << s.file << ":" << s.line
                               << " the kernel computed the same bits: the emulator would not catch its removal";
  }
  return sites.size();
}

TEST(EmulatorRemovedBarrier, EveryBarrierOfDecodeAndPrefillAttentionMatters) {
  cuda::Stream stream;
  Noise noise{3};
  const int n_head = 4, n_head_kv = 2, head_dim = 64;
  const int64_t kv_stride = 2 * n_head_kv * head_dim, q_stride = n_head * head_dim;
  for (const auto& [p0, n_tokens] : {std::pair<int64_t, int64_t>{500, 1}, {490, 6}}) {  // two full rounds of 8 blocks
    const int64_t positions = p0 + n_tokens;
    const auto k = upload(noise.values(size_t(positions * kv_stride)), stream);
    const auto v = upload(noise.values(size_t(positions * kv_stride)), stream);
    const auto q = upload(noise.values(size_t(n_tokens * q_stride)), stream);
    cuda::DeviceBuffer out(size_t(n_tokens * q_stride) * 4);
    const size_t sites = expect_every_barrier_matters("kernels/cuda/attention.cu", [&] {
      cuda::attention(q.as<float>(), q_stride, k.as<float>(), v.as<float>(), kv_stride,
                      cuda::AttentionShape{n_head, n_head_kv, head_dim, 0.125f}, p0, n_tokens, out.as<float>(),
                      q_stride, stream);
      return download(out, size_t(n_tokens * q_stride), stream);
    });
    EXPECT_GE(sites, 2u) << "p0 " << p0 << " tokens " << n_tokens;
    std::printf("attention, p0 %lld, %lld tokens: %zu barrier sites, each one needed\n", (long long)p0,
                (long long)n_tokens, sites);
  }
}

TEST(EmulatorRemovedBarrier, EveryBarrierOfPrefillMatmulAndRmsnormMatters) {
  cuda::Stream stream;
  Noise noise{5};
  const int64_t rows = 24, cols = 600, n_tokens = 20;  // three staging chunks
  const auto w_host = noise.values(size_t(rows * cols));
  const auto w = upload(w_host, stream);
  const auto x = upload(noise.values(size_t(n_tokens * cols)), stream);
  cuda::DeviceBuffer y(size_t(n_tokens * rows) * 4);
  WeightMatrix view;
  view.type = WeightType::F32;
  view.data = w.as<const uint8_t>();
  view.rows = rows;
  view.cols = cols;
  view.row_bytes = cols * 4;
  const size_t matmul_sites = expect_every_barrier_matters("kernels/cuda/matmul.cu", [&] {
    const cuda::MatmulOutput out[1] = {{view, y.as<float>(), rows}};
    cuda::matmul(out, x.as<float>(), cols, n_tokens, stream);
    return download(y, size_t(n_tokens * rows), stream);
  });
  EXPECT_EQ(matmul_sites, 2u);
  const auto norm_w = upload(noise.values(size_t(cols)), stream);
  cuda::DeviceBuffer normed(size_t(n_tokens * cols) * 4);
  const size_t norm_sites = expect_every_barrier_matters("kernels/cuda/ops.cu", [&] {
    cuda::rmsnorm(x.as<float>(), norm_w.as<float>(), n_tokens, cols, 1e-5f, normed.as<float>(), stream);
    return download(normed, size_t(n_tokens * cols), stream);
  });
  EXPECT_EQ(norm_sites, 1u);
}

// Random Q4_1 blocks whose f16 scales d and m are 0.1: any payload is a
// valid block.
std::vector<uint8_t> random_q4_1(int64_t rows, int64_t cols, uint64_t seed) {
  const int64_t blocks = rows * cols / 32;
  std::vector<uint8_t> bytes(size_t(blocks * 20));
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t((seed = seed * 6364136223846793005ull + 1) >> 56);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint16_t tenth = 0x2e66;
    std::memcpy(&bytes[size_t(b * 20)], &tenth, 2);
    std::memcpy(&bytes[size_t(b * 20) + 2], &tenth, 2);
  }
  return bytes;
}

// Both barriers of a warp's round (terms written, terms read) in the decode
// and the prefill kernel. The barrier sites are source lines, shared by every
// format; a 32-element format shows each one best (a round is 32 blocks, one
// lane each, with no shuffle in between to hold the lanes together as the
// K formats' per-block integer sums do).
TEST(EmulatorRemovedBarrier, EveryBarrierOfTheQ8MatmulMatters) {
  cuda::Stream stream;
  Noise noise{9};
  const int64_t rows = 8, cols = 32 * 70;  // three rounds per row
  const auto w_host = random_q4_1(rows, cols, 17);
  const auto w = upload(w_host, stream);
  WeightMatrix view;
  view.type = WeightType::Q4_1;
  view.data = w.as<const uint8_t>();
  view.rows = rows;
  view.cols = cols;
  view.row_bytes = w_host.size() / size_t(rows);
  for (const int64_t n_tokens : {1, 5}) {  // the decode and the prefill kernel
    SCOPED_TRACE(std::to_string(n_tokens) + " tokens");
    const auto x = upload(noise.values(size_t(n_tokens * cols)), stream);
    cuda::DeviceBuffer y(size_t(n_tokens * rows) * 4), scratch(cuda::matmul_q8_scratch_bytes(cols, n_tokens));
    const size_t sites = expect_every_barrier_matters("kernels/cuda/matmul_q8.cu", [&] {
      const cuda::MatmulOutput out[1] = {{view, y.as<float>(), rows}};
      cuda::matmul_q8(out, x.as<float>(), cols, n_tokens, scratch.data(), scratch.bytes(), stream);
      return download(y, size_t(n_tokens * rows), stream);
    });
    EXPECT_EQ(sites, 2u);
  }
}

}  // namespace
}  // namespace kvg
