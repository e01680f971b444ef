// Blocks every signal in the calling thread for the lifetime of the guard.
//
// CUDA starts driver threads when it initialises and when it creates a
// stream, and a new thread inherits the creating thread's signal mask. In a
// PostgreSQL backend the process-directed signals (SIGINT for cancel, SIGTERM,
// SIGALRM for timeouts, SIGUSR1 latches) must only ever run their handlers on
// the backend's own thread: a handler running on a driver thread would set
// flags and touch latches behind the backend's back. Creating those threads
// with every signal blocked keeps the handlers off them for good; restoring
// the mask afterwards leaves the backend's own thread as it was. The fault
// signals stay open (common/fault_signals.hpp): blocked, a fault kills the
// process whatever handler is installed.
//
// Plain C++ (POSIX), header-only, so the CUDA sources, the emulator and the
// CPU-only tests all use the same guard.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <cstring>
#include <stdexcept>

#include "common/fault_signals.hpp"

namespace kvg::cuda {

class SignalBlock {
 public:
  SignalBlock() {
    sigset_t all;
    sigfillset(&all);
    remove_synchronous_fault_signals(&all);
    const int rc = pthread_sigmask(SIG_BLOCK, &all, &saved_);
    // Cannot fail with valid arguments; if it did, CUDA must not start threads
    // that could take PostgreSQL's signals.
    if (rc != 0) throw std::runtime_error(std::string("pthread_sigmask: ") + std::strerror(rc));
  }
  ~SignalBlock() { pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
  SignalBlock(const SignalBlock&) = delete;
  SignalBlock& operator=(const SignalBlock&) = delete;

 private:
  sigset_t saved_;
};

}  // namespace kvg::cuda
