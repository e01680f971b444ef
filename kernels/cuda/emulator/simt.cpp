// The emulator's scheduler (rules in include/simt.hpp). Each CUDA thread of
// a block is a fiber (its own stack, entered with swapcontext, switched with
// _setjmp/_longjmp so that no signal-mask system call is made per switch). A
// fiber runs until it reaches a barrier or a warp collective; the ready
// fibers of a block run in a freshly shuffled order every round. The
// scheduler releases a warp collective once every lane of its mask waits at
// it, and a block barrier once every thread waits at it. Anything else that
// blocks progress is a bug in the kernel: abort, naming it.
#include "simt.hpp"

#include <ucontext.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

namespace simt {

bool testing::Site::operator<(const Site& o) const {
  const int c = std::strcmp(file, o.file);
  return c != 0 ? c < 0 : line < o.line;
}

namespace {

// Per block, as on every GPU since Volta without an opt-in attribute (the
// kernels here never opt in): static plus dynamic shared memory.
constexpr size_t kSharedLimit = 48 * 1024;
constexpr unsigned kMaxThreadsPerBlock = 1024;

enum class Wait { None, Block, Warp };

struct Fiber {
  ucontext_t context;
  jmp_buf resume;
  std::vector<char> stack;
  bool started = false, done = false;
  bool slow = false;  // runs in one scheduling pass out of ~16 (a stalled warp or lane)
  Wait wait = Wait::None;
  std::source_location site;
  // The warp collective this lane waits at, and what it brought / gets.
  WarpOp op = WarpOp::Sync;
  unsigned mask = 0;
  uint64_t value = 0, result = 0;
  int arg = 0, width = 32;
  uint3 index{};
};

std::vector<Fiber> fibers;
jmp_buf scheduler;
ucontext_t scheduler_context;
Fiber* current = nullptr;
int current_linear = 0;
const std::function<void()>* kernel = nullptr;
thread_local cudaError_t pending_error = cudaSuccess;

uint64_t seed_from_environment() {
  const char* s = std::getenv("KVG_SIMT_SEED");
  return s && *s ? std::strtoull(s, nullptr, 0) : 1;
}
uint64_t the_seed = seed_from_environment();
std::mt19937_64 rng(the_seed);
unsigned char poison_byte() { return (the_seed & 1) ? 0x7f : 0xff; }

// Shared memory: which block last poisoned each array, and this block's total.
struct SharedArray {
  size_t bytes = 0;
  uint64_t block = 0;
};
std::map<void*, SharedArray> shared_arrays;
uint64_t block_serial = 0;  // counts blocks across launches
size_t block_static_shared = 0, launch_dynamic_shared = 0;
std::vector<unsigned char> dynamic_shared_memory;

std::set<testing::Site> sites_seen, sites_dropped;

std::string where(const std::source_location& s) {
  return std::string(s.file_name()) + ":" + std::to_string(s.line());
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "SIMT emulator (seed %llu): %s (block %u,%u,%u)\n", (unsigned long long)the_seed,
               what.c_str(), blockIdx.x, blockIdx.y, blockIdx.z);
  std::abort();
}

void entry() {
  (*kernel)();
  current->done = true;
  _longjmp(scheduler, 1);
}

void wait_at(Wait w, const std::source_location& site) {
  current->wait = w;
  current->site = site;
  if (!_setjmp(current->resume)) _longjmp(scheduler, 1);
}

// Whether a dropped barrier site: it still counts as seen.
bool dropped(const std::source_location& site) {
  const testing::Site s{site.file_name(), site.line()};
  sites_seen.insert(s);
  return !sites_dropped.empty() && sites_dropped.count(s);
}

void start_block(int n) {
  ++block_serial;
  // A few warps and lanes of each block are slow: on hardware a warp may
  // stall for a long time (memory, scheduling) while the others run ahead.
  bool slow_warp = false;
  block_static_shared = 0;
  if (launch_dynamic_shared) std::memset(dynamic_shared_memory.data(), poison_byte(), launch_dynamic_shared);
  for (int i = 0; i < n; ++i) {
    Fiber& f = fibers[size_t(i)];
    f.started = f.done = false;
    f.wait = Wait::None;
    // Mostly whole warps (a lane's speed gates its warp at every __syncwarp
    // and shuffle, so many slow lanes would slow every warp alike).
    if (i % 32 == 0) slow_warp = rng() % 2 == 0;
    f.slow = slow_warp || rng() % 64 == 0;
    f.index = {unsigned(i) % blockDim.x, (unsigned(i) / blockDim.x) % blockDim.y, unsigned(i) / (blockDim.x * blockDim.y)};
    if (f.stack.empty()) f.stack.resize(size_t(1) << 18);
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack.data();
    f.context.uc_stack.ss_size = f.stack.size();
    f.context.uc_link = nullptr;
    makecontext(&f.context, entry, 0);
  }
}

// Runs every ready fiber once, in a random order; true if any ran.
bool run_ready(int n) {
  static std::vector<int> order;
  order.clear();
  for (int i = 0; i < n; ++i)
    if (!fibers[size_t(i)].done && fibers[size_t(i)].wait == Wait::None) order.push_back(i);
  std::shuffle(order.begin(), order.end(), rng);
  // A slow fiber mostly sits out a pass while a fast one is ready; with only
  // slow ones ready, holding them back would only cost passes.
  const bool fast_ready =
      std::any_of(order.begin(), order.end(), [](int i) { return !fibers[size_t(i)].slow; });
  for (const int i : order) {
    Fiber& f = fibers[size_t(i)];
    if (fast_ready && f.slow && rng() % 16 != 0) continue;
    current = &f;
    current_linear = i;
    threadIdx = f.index;
    if (!_setjmp(scheduler)) {
      if (!f.started) {
        f.started = true;
        swapcontext(&scheduler_context, &f.context);
      } else {
        _longjmp(f.resume, 1);
      }
    }
    current = nullptr;
  }
  return !order.empty();
}

const char* op_name(WarpOp op) {
  switch (op) {
    case WarpOp::Sync: return "__syncwarp";
    case WarpOp::ShflIdx: return "__shfl_sync";
    case WarpOp::ShflUp: return "__shfl_up_sync";
    case WarpOp::ShflDown: return "__shfl_down_sync";
    case WarpOp::ShflXor: return "__shfl_xor_sync";
    case WarpOp::Ballot: return "__ballot_sync";
  }
  return "?";
}

// The lane whose value lane `j` receives (j itself when the source lies
// outside j's segment, as the hardware defines).
int source_lane(const Fiber& f, int j) {
  const int base = j & ~(f.width - 1), end = base + f.width;
  switch (f.op) {
    case WarpOp::ShflIdx: return base + (f.arg & (f.width - 1));
    case WarpOp::ShflUp: return j - f.arg >= base ? j - f.arg : j;
    case WarpOp::ShflDown: return j + f.arg < end ? j + f.arg : j;
    case WarpOp::ShflXor: {
      const int s = j ^ f.arg;
      return s >= 0 && s < end && s < 32 ? s : j;
    }
    default: return j;
  }
}

// Completes the collective of warp w that lane l waits at, if all of its
// mask has arrived; true if released.
bool try_release_warp(int w, int l) {
  Fiber* lane = &fibers[size_t(w * 32)];
  const Fiber& f = lane[l];
  for (int j = 0; j < 32; ++j) {
    if (!(f.mask >> j & 1)) continue;
    const Fiber& g = lane[j];
    if (g.done)
      fail(std::string(op_name(f.op)) + " at " + where(f.site) + ": mask names lane " + std::to_string(j) +
           ", which has exited");
    if (g.wait != Wait::Warp || g.mask != f.mask) return false;  // not there yet (or at another collective first)
    if (g.op != f.op || (f.op != WarpOp::Sync && g.site.line() != f.site.line()))
      fail("lanes " + std::to_string(l) + " and " + std::to_string(j) + " of warp " + std::to_string(w) +
           " meet with one mask at different warp operations: " + op_name(f.op) + " at " + where(f.site) + ", " +
           op_name(g.op) + " at " + where(g.site));
  }
  uint64_t ballot = 0;
  if (f.op == WarpOp::Ballot)
    for (int j = 0; j < 32; ++j)
      if ((f.mask >> j & 1) && lane[j].value) ballot |= uint64_t(1) << j;
  for (int j = 0; j < 32; ++j) {
    if (!(f.mask >> j & 1)) continue;
    Fiber& g = lane[j];
    if (f.op == WarpOp::Ballot) {
      g.result = ballot;
    } else if (f.op != WarpOp::Sync) {
      const int s = source_lane(g, j);
      if (!(f.mask >> s & 1))
        fail(std::string(op_name(f.op)) + " at " + where(f.site) + ": lane " + std::to_string(j) + " reads lane " +
             std::to_string(s) + ", which is not in the mask (an undefined value on hardware)");
      g.result = lane[s].value;
    }
  }
  for (int j = 0; j < 32; ++j)
    if (f.mask >> j & 1) lane[j].wait = Wait::None;
  return true;
}

std::string describe_waits(int n) {
  std::string s;
  int listed = 0;
  for (int i = 0; i < n && listed < 8; ++i) {
    const Fiber& f = fibers[size_t(i)];
    if (f.done || f.wait == Wait::None) continue;
    s += "; thread " + std::to_string(i) + " at " +
         (f.wait == Wait::Block ? std::string("__syncthreads") : std::string(op_name(f.op))) + " " + where(f.site);
    if (f.wait == Wait::Warp) {
      char mask[16];
      std::snprintf(mask, sizeof mask, "%08x", f.mask);
      s += std::string(" mask ") + mask;
    }
    ++listed;
  }
  return s;
}

// Releases the barriers whose threads have all arrived; false when the
// block has finished.
bool release(int n, bool ran) {
  int done = 0, at_block = 0;
  for (int i = 0; i < n; ++i) {
    const Fiber& f = fibers[size_t(i)];
    done += f.done;
    at_block += !f.done && f.wait == Wait::Block;
  }
  if (done == n) return false;
  if (at_block == n - done) {
    if (done > 0) {
      const Fiber& waiting = *std::find_if(fibers.begin(), fibers.begin() + n, [](const Fiber& f) { return !f.done; });
      fail("__syncthreads at " + where(waiting.site) + " after " + std::to_string(done) +
           " threads of the block exited (every thread must reach it)");
    }
    const Fiber* first = nullptr;
    for (int i = 0; i < n; ++i) {
      Fiber& f = fibers[size_t(i)];
      if (!first) first = &f;
      else if (f.site.line() != first->site.line() || std::strcmp(f.site.file_name(), first->site.file_name()) != 0)
        fail("threads of one block wait at different __syncthreads: " + where(first->site) + " and " + where(f.site));
      f.wait = Wait::None;
    }
    return true;
  }
  bool released = false;
  for (int w = 0; w < n / 32; ++w)
    for (int l = 0; l < 32; ++l) {
      const Fiber& f = fibers[size_t(w * 32 + l)];
      if (!f.done && f.wait == Wait::Warp && try_release_warp(w, l)) released = true;
    }
  if (!ran && !released) fail("deadlock: threads wait at barriers that can never complete" + describe_waits(n));
  return true;
}

}  // namespace

int preempt_countdown = 1 << 30;  // host code before the first launch: never

// The longest run of arithmetic intrinsics between two preemptions
// (KVG_SIMT_PREEMPT, default 48): each switch costs about as much as a few
// dozen emulated operations.
const int preempt_span = [] {
  const char* s = std::getenv("KVG_SIMT_PREEMPT");
  return s && *s ? std::max(1, std::atoi(s)) : 48;
}();

void preempt() {
  preempt_countdown = 1 + int(rng() % unsigned(preempt_span));
  if (!current) return;  // host code calling an intrinsic
  wait_at(Wait::None, current->site);
}

void sync_block(std::source_location site) {
  if (dropped(site)) return;
  wait_at(Wait::Block, site);
}

uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int arg, int width, std::source_location site) {
  if (op == WarpOp::Sync && dropped(site)) return 0;
  const int lane = current_linear % 32;
  if (!(mask >> lane & 1))
    fail(std::string(op_name(op)) + " at " + where(site) + ": lane " + std::to_string(lane) +
         " calls it with a mask that does not contain itself");
  if (width < 1 || width > 32 || (width & (width - 1)))
    fail(std::string(op_name(op)) + " at " + where(site) + ": width " + std::to_string(width) +
         " is not a power of two up to 32");
  Fiber& f = *current;
  f.op = op;
  f.mask = mask;
  f.value = value;
  f.arg = arg;
  f.width = width;
  wait_at(Wait::Warp, site);
  return current->result;
}

void shared_array(void* data, size_t bytes) {
  SharedArray& a = shared_arrays[data];
  if (a.block == block_serial) return;
  a.block = block_serial;
  a.bytes = bytes;
  std::memset(data, poison_byte(), bytes);
  block_static_shared += bytes;
  if (block_static_shared + launch_dynamic_shared > kSharedLimit)
    fail("the block uses " + std::to_string(block_static_shared) + " bytes of static and " +
         std::to_string(launch_dynamic_shared) + " of dynamic shared memory, over the " +
         std::to_string(kSharedLimit) + "-byte limit per block");
}

void* dynamic_shared() { return dynamic_shared_memory.data(); }

cudaError_t last_error(bool clear) {
  const cudaError_t e = pending_error;
  if (clear) pending_error = cudaSuccess;
  return e;
}

void launch(dim3 grid, dim3 block, size_t dynamic_shared_bytes, cudaStream_t, int max_threads,
            const std::function<void()>& body) {
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  auto refuse = [](cudaError_t e) {
    if (pending_error == cudaSuccess) pending_error = e;  // the first error sticks until read, as in CUDA
  };
  if (block.x == 0 || block.y == 0 || block.z == 0 || block.x > 1024 || block.y > 1024 || block.z > 64 ||
      threads > kMaxThreadsPerBlock || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu ||
      grid.y > 65535 || grid.z > 65535)
    return refuse(cudaErrorInvalidConfiguration);
  if (max_threads > 0 && threads > uint64_t(max_threads)) return refuse(cudaErrorLaunchOutOfResources);
  if (dynamic_shared_bytes > kSharedLimit) return refuse(cudaErrorInvalidValue);
  const int n = int(threads);
  if (n % 32 != 0) fail("block of " + std::to_string(n) + " threads: the emulator runs whole warps only");
  const uint64_t blocks = uint64_t(grid.x) * grid.y * grid.z;
  if (blocks > (uint64_t(1) << 24)) fail("a grid of " + std::to_string(blocks) + " blocks is too large to emulate");
  gridDim = grid;
  blockDim = block;
  kernel = &body;
  launch_dynamic_shared = dynamic_shared_bytes;
  dynamic_shared_memory.resize(dynamic_shared_bytes + 16);
  if (int(fibers.size()) < n) fibers.resize(size_t(n));
  // Blocks in a random order: a kernel may not depend on which runs first.
  std::vector<uint32_t> order(blocks);
  for (uint32_t i = 0; i < blocks; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  // The first preemption of the launch comes a seeded few intrinsics in (the
  // count left by the previous launch, or the initial one, could be anything).
  preempt_countdown = 1 + int(rng() % unsigned(preempt_span));
  for (const uint32_t b : order) {
    blockIdx = {b % grid.x, (b / grid.x) % grid.y, b / (grid.x * grid.y)};
    start_block(n);
    for (bool running = true; running;) running = release(n, run_ready(n));
  }
}

namespace testing {
uint64_t seed() { return the_seed; }
void set_seed(uint64_t s) {
  the_seed = s;
  rng.seed(s);
}
void clear_sites_seen() { simt::sites_seen.clear(); }
size_t sites_seen(Site* out, size_t capacity) {
  size_t i = 0;
  for (const Site& s : simt::sites_seen) {
    if (i == capacity) break;
    out[i++] = s;
  }
  return simt::sites_seen.size();
}
void drop_barrier(const Site& site) { sites_dropped.insert(site); }
void restore_barriers() { sites_dropped.clear(); }
}  // namespace testing

}  // namespace simt
