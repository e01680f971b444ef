// Threads that PostgreSQL's signals never reach.
//
// A backend's signal handlers (cancel, terminate, latch wake-ups) must run on
// the backend's own thread; a thread inherits its creator's signal mask, so
// the engine's threads are created with every signal blocked but the fault
// signals (common/fault_signals.hpp), and the creator's mask is restored.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <thread>
#include <utility>

#include "common/fault_signals.hpp"

namespace kvg {

template <class Fn>
std::thread start_quiet_thread(Fn&& fn) {
  sigset_t all, previous;
  sigfillset(&all);
  remove_synchronous_fault_signals(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);
  struct Restore {
    sigset_t mask;
    ~Restore() { pthread_sigmask(SIG_SETMASK, &mask, nullptr); }
  } restore{previous};
  return std::thread(std::forward<Fn>(fn));
}

}  // namespace kvg
