// SHA-256 on a thread of its own, so that reading an artifact and hashing it
// overlap: while the caller's thread reads the next chunk from its source (a
// large object, a file), this one hashes the chunk before. A graft's payload
// goes straight into the KV cache and stays there unchanged, so those bytes
// can be hashed in place, later, in order.
//
// The caller keeps every submitted span alive and unchanged until drain()
// (or the destructor) has returned. The thread calls nothing but OpenSSL on
// memory it is given, and PostgreSQL's signals never reach it
// (common/quiet_thread.hpp), so it is safe inside a backend.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "storage/sha256.hpp"

namespace kvg {

class BackgroundHasher {
 public:
  // Hashes into `sha`, which the caller must not touch until drain().
  explicit BackgroundHasher(Sha256& sha);
  ~BackgroundHasher();  // drains (a failure is dropped: drain() reports it)
  BackgroundHasher(const BackgroundHasher&) = delete;
  BackgroundHasher& operator=(const BackgroundHasher&) = delete;

  // Queued after everything submitted before it.
  void submit(const uint8_t* data, size_t n);
  // Returns once every submitted span is hashed; rethrows the hasher's failure.
  void drain();
  // Seconds the thread spent hashing (complete after drain()).
  double busy_seconds() const;

 private:
  struct Span {
    const uint8_t* data;
    size_t n;
  };
  void loop();

  Sha256& sha_;
  mutable std::mutex mutex_;
  std::condition_variable work_, idle_;
  std::deque<Span> queue_;
  bool hashing_ = false, stopping_ = false;
  std::exception_ptr failure_;
  double busy_s_ = 0;
  std::thread thread_;  // last: started once the state above exists
};

}  // namespace kvg
