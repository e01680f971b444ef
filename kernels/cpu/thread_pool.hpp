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
  // n_threads counts the calling thread: 1 means "run inline, no workers".
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }

  // Calls fn(i) for every i in [0, n_tasks), spread over the pool; returns when
  // all calls have returned. fn must not throw.
  void run(size_t n_tasks, const std::function<void(size_t)>& fn);

 private:
  void worker_loop();
  void drain(const std::function<void(size_t)>& fn, size_t n_tasks);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  const std::function<void(size_t)>* job_ = nullptr;
  size_t job_tasks_ = 0;
  std::atomic<size_t> next_task_{0};
  std::atomic<size_t> done_tasks_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> busy_workers_{0};
  bool stopping_ = false;
};

}  // namespace kvg
