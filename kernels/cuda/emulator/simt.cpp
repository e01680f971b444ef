// The emulator's scheduler. Each CUDA thread of a block is a fiber (its own
// stack, entered with swapcontext, switched with _setjmp/_longjmp so that no
// signal-mask system call is made per switch). A fiber runs until it reaches
// a barrier; the scheduler releases a warp barrier once every lane of the
// warp waits at one and a block barrier once every live thread waits at one.
// Anything else that blocks progress is a bug in the kernel: abort.
#include "simt.hpp"

#include <ucontext.h>

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <vector>

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

namespace simt {
namespace {

enum class Wait { None, Block, Warp };

struct Fiber {
  ucontext_t context;
  jmp_buf resume;
  std::vector<char> stack;
  bool started = false, done = false;
  Wait wait = Wait::None;
  unsigned shuffles = 0;  // selects the shuffle slot generation
  uint3 index{};
};

std::vector<Fiber> fibers;
jmp_buf scheduler;
ucontext_t scheduler_context;
Fiber* current = nullptr;
const std::function<void()>* kernel = nullptr;
// Two generations of shuffle slots: a lane writes generation g, waits at the
// warp barrier, reads its partner's slot g. It can write g again only two
// barriers later, after every lane has read it.
std::vector<float> slots[2];

int linear(const uint3& t) { return int(t.x + blockDim.x * (t.y + blockDim.y * t.z)); }

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "SIMT emulator: %s (block %u,%u,%u)\n", what, blockIdx.x, blockIdx.y, blockIdx.z);
  std::abort();
}

void entry() {
  (*kernel)();
  current->done = true;
  _longjmp(scheduler, 1);
}

void wait_at(Wait w) {
  current->wait = w;
  if (!_setjmp(current->resume)) _longjmp(scheduler, 1);
}

void start_block(int n) {
  for (int i = 0; i < n; ++i) {
    Fiber& f = fibers[size_t(i)];
    f.started = f.done = false;
    f.wait = Wait::None;
    f.shuffles = 0;
    f.index = {unsigned(i) % blockDim.x, (unsigned(i) / blockDim.x) % blockDim.y, unsigned(i) / (blockDim.x * blockDim.y)};
    if (f.stack.empty()) f.stack.resize(size_t(1) << 18);
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack.data();
    f.context.uc_stack.ss_size = f.stack.size();
    f.context.uc_link = nullptr;
    makecontext(&f.context, entry, 0);
  }
}

// Runs every ready fiber once; true if any ran.
bool run_ready(int n) {
  bool ran = false;
  for (int i = 0; i < n; ++i) {
    Fiber& f = fibers[size_t(i)];
    if (f.done || f.wait != Wait::None) continue;
    current = &f;
    threadIdx = f.index;
    if (!_setjmp(scheduler)) {
      if (!f.started) {
        f.started = true;
        swapcontext(&scheduler_context, &f.context);
      } else {
        _longjmp(f.resume, 1);
      }
    }
    ran = true;
  }
  return ran;
}

// Releases the barriers whose threads have all arrived; false when the
// block has finished.
bool release(int n, bool ran) {
  bool all_done = true, all_at_block_barrier = true;
  for (int i = 0; i < n; ++i) {
    const Fiber& f = fibers[size_t(i)];
    if (f.done) continue;
    all_done = false;
    if (f.wait != Wait::Block) all_at_block_barrier = false;
  }
  if (all_done) return false;
  if (all_at_block_barrier) {
    for (int i = 0; i < n; ++i) fibers[size_t(i)].wait = Wait::None;
    return true;
  }
  bool released = false;
  for (int w = 0; w < n / 32; ++w) {
    int waiting = 0, exited = 0;
    for (int l = 0; l < 32; ++l) {
      const Fiber& f = fibers[size_t(w * 32 + l)];
      exited += f.done;
      waiting += !f.done && f.wait == Wait::Warp;
    }
    if (waiting > 0 && waiting + exited == 32) {
      if (exited) fail("warp barrier or full-mask shuffle with exited lanes");
      for (int l = 0; l < 32; ++l) fibers[size_t(w * 32 + l)].wait = Wait::None;
      released = true;
    }
  }
  if (!ran && !released) fail("deadlock: threads wait at barriers that can never complete");
  return true;
}

}  // namespace

void sync_block() { wait_at(Wait::Block); }
void sync_warp() { wait_at(Wait::Warp); }

float shfl_down(float v, unsigned delta, int width) {
  const int tid = linear(current->index);
  const unsigned g = current->shuffles++ & 1;
  slots[g][size_t(tid)] = v;
  wait_at(Wait::Warp);
  const int segment_lane = (tid % 32) % width;
  const int source = segment_lane + int(delta) < width ? tid + int(delta) : tid;
  return slots[g][size_t(source)];
}

void launch(dim3 grid, dim3 block, const std::function<void()>& body) {
  const int n = int(block.x * block.y * block.z);
  if (n <= 0 || n % 32 != 0) fail("block size is not a positive multiple of 32");
  gridDim = grid;
  blockDim = block;
  kernel = &body;
  if (int(fibers.size()) < n) fibers.resize(size_t(n));
  slots[0].assign(size_t(n), 0.0f);
  slots[1].assign(size_t(n), 0.0f);
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        blockIdx = {x, y, z};
        start_block(n);
        for (bool running = true; running;) running = release(n, run_ready(n));
      }
}

}  // namespace simt
