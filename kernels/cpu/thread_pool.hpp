// A persistent pool of worker threads for the CPU kernels.
//
// It must be safe inside a PostgreSQL backend: workers block every signal
// (so the server's handlers only ever run on the backend's own thread), never
// call anything outside the kernels, and live as long as the pool. Tasks are
// independent by construction (recipe rule 1), so which worker runs which task
// never changes a result.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvg {

class ThreadPool {
 public:
  // Spinning briefly before sleeping keeps per-layer dispatch cheap during
  // decode (dozens of parallel regions per token) without burning a core idle.
  static constexpr int kDefaultSpinRounds = 20000;

  // n_threads counts the calling thread: 1 means "run inline, no workers".
  // The workers start with the first job handed to them, so a pool whose
  // every run() is done inline (small passes, engine/pass_threads.hpp)
  // never starts a thread: a server call on a small model took less time
  // than starting and joining one. spin_rounds: pause instructions a worker
  // spins for the next job before it sleeps.
  explicit ThreadPool(int n_threads, int spin_rounds = kDefaultSpinRounds);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(i) for every i in [0, n_tasks), spread over the pool; returns when
  // all calls have returned. fn must not throw.
  void run(size_t n_tasks, const std::function<void(size_t)>& fn);

  // Tells the workers spinning for the next job to sleep now: for a caller
  // that knows a while of other work comes before its next run() (the engine
  // worker between passes), so the spin does not take a core from the
  // processes that work needs. The next run() wakes them; no result changes.
  void park();

  // Workers asleep now, waiting for a job (for tests).
  int sleeping() const { return sleeping_.load(std::memory_order_acquire); }
  // Worker threads started so far (for tests).
  int started() const { return int(workers_.size()); }
  // Jobs handed to the workers so far; a run() done inline (one task, or a
  // pool of one thread) is not one (for tests).
  uint64_t jobs_dispatched() const { return generation_.load(std::memory_order_acquire); }  // one generation a job

 private:
  void worker_loop();
  void drain(const std::function<void(size_t)>& fn, size_t n_tasks);

  const int n_threads_;
  std::vector<std::thread> workers_;  // started by the first job run() hands out
  std::mutex mutex_;
  std::condition_variable wake_;
  const std::function<void(size_t)>* job_ = nullptr;
  size_t job_tasks_ = 0;
  std::atomic<size_t> next_task_{0};
  std::atomic<size_t> done_tasks_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> busy_workers_{0};
  std::atomic<bool> parked_{false};
  std::atomic<int> sleeping_{0};
  const int spin_rounds_;
  bool stopping_ = false;
};

}  // namespace kvg
