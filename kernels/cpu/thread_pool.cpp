#include "kernels/cpu/thread_pool.hpp"

#include <algorithm>

#include "common/quiet_thread.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#define KVG_CPU_RELAX() _mm_pause()
#else
#define KVG_CPU_RELAX() ((void)0)
#endif

namespace kvg {

ThreadPool::ThreadPool(int n_threads, int spin_rounds) : n_threads_(std::max(1, n_threads)), spin_rounds_(spin_rounds) {}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::drain(const std::function<void(size_t)>& fn, size_t n_tasks) {
  for (;;) {
    const size_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= n_tasks) break;
    fn(task);
    done_tasks_.fetch_add(1, std::memory_order_release);
  }
}

void ThreadPool::run(size_t n_tasks, const std::function<void(size_t)>& fn) {
  if (n_tasks == 0) return;
  if (n_threads_ == 1 || n_tasks == 1) {
    for (size_t i = 0; i < n_tasks; ++i) fn(i);
    return;
  }
  // Started while generation_ is still 0, which each worker takes as seen:
  // the generation this job installs below is its first.
  // Fault signals stay deliverable: a worker reading a model file truncated
  // under it must reach the SIGBUS handler (engine/gguf/mapping_guard.hpp).
  if (workers_.empty())
    for (int i = 1; i < n_threads_; ++i) workers_.push_back(start_quiet_thread([this] { worker_loop(); }));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // A worker that woke late for the previous job may still be leaving
    // drain(); it holds no task, but the counters must not be reset under it.
    while (busy_workers_.load(std::memory_order_acquire) != 0) KVG_CPU_RELAX();
    job_ = &fn;
    job_tasks_ = n_tasks;
    parked_.store(false, std::memory_order_relaxed);
    next_task_.store(0, std::memory_order_relaxed);
    done_tasks_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  drain(fn, n_tasks);
  while (done_tasks_.load(std::memory_order_acquire) < n_tasks) KVG_CPU_RELAX();
}

void ThreadPool::park() { parked_.store(true, std::memory_order_relaxed); }

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen && spins < spin_rounds_ &&
           !parked_.load(std::memory_order_relaxed)) {
      KVG_CPU_RELAX();
      ++spins;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    sleeping_.fetch_add(1, std::memory_order_acq_rel);
    wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
    sleeping_.fetch_sub(1, std::memory_order_acq_rel);
    seen = generation_.load(std::memory_order_acquire);
    if (stopping_) return;
    // Taken under the mutex, so run() cannot install the next job meanwhile.
    const std::function<void(size_t)>* job = job_;
    const size_t n_tasks = job_tasks_;
    busy_workers_.fetch_add(1, std::memory_order_acq_rel);
    lock.unlock();
    drain(*job, n_tasks);
    busy_workers_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace kvg
