#include "storage/background_hasher.hpp"

#include <chrono>
#include <utility>

#include "common/quiet_thread.hpp"

namespace kvg {

BackgroundHasher::BackgroundHasher(Sha256& sha) : sha_(sha), thread_(start_quiet_thread([this] { loop(); })) {}

BackgroundHasher::~BackgroundHasher() {
  {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [this] { return queue_.empty() && !hashing_; });
    stopping_ = true;
  }
  work_.notify_one();
  thread_.join();
}

void BackgroundHasher::submit(const uint8_t* data, size_t n) {
  if (n == 0) return;
  {
    std::lock_guard lock(mutex_);
    queue_.push_back({data, n});
  }
  work_.notify_one();
}

void BackgroundHasher::drain() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [this] { return queue_.empty() && !hashing_; });
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
}

double BackgroundHasher::busy_seconds() const {
  std::lock_guard lock(mutex_);
  return busy_s_;
}

void BackgroundHasher::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left
    const Span span = queue_.front();
    queue_.pop_front();
    hashing_ = true;
    lock.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    std::exception_ptr failed;
    try {
      sha_.update(span.data, span.n);
    } catch (...) {
      failed = std::current_exception();
    }
    const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    lock.lock();
    busy_s_ += spent;
    if (failed && !failure_) failure_ = failed;
    hashing_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

}  // namespace kvg
