// The signals a faulting instruction raises in its own thread.
//
// SIGBUS (a mapped file truncated under a read, engine/gguf/mapping_guard.hpp),
// SIGSEGV, SIGFPE and SIGILL are delivered synchronously to the thread that
// faulted. If that thread blocks the signal, the kernel kills the process
// whatever handler is installed, so code that blocks "every signal" in a
// thread (the CPU worker pool, CUDA driver threads) removes these from its set:
// the handler (or the default action) then decides, as on the main thread.
#pragma once

#include <signal.h>

namespace kvg {

inline void remove_synchronous_fault_signals(sigset_t* set) {
  for (int sig : {SIGBUS, SIGSEGV, SIGFPE, SIGILL}) sigdelset(set, sig);
}

}  // namespace kvg
