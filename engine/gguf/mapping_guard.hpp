// Survives a memory-mapped file being truncated while it is read.
//
// A read of a page of a shared file mapping that lies past the file's end
// (someone ran `truncate` or opened the model with O_TRUNC while a call used
// it) makes the kernel send SIGBUS to the reading thread; by default that
// kills the process, and in PostgreSQL a killed backend restarts them all.
// While a MappingGuard is registered for a mapping, one process-wide SIGBUS
// handler replaces the lost range of *that* mapping (from the faulting page
// to its end) with anonymous zero pages, marks the mapping damaged and lets
// the read finish on zeros. Whoever computes from the mapping checks
// damaged() at safe points and fails the call with a clear error; the data
// read meanwhile is void. A SIGBUS anywhere else goes to the handler that
// was installed before ours (or the default action, which ends the process).
//
// Threads that may read a guarded mapping must leave SIGBUS unblocked: a
// blocked synchronous SIGBUS kills the process whatever the handler
// (common/fault_signals.hpp).
#pragma once

#include <cstddef>

namespace kvg::gguf {

class MappingGuard {
 public:
  // Registers [base, base + size). The first registration installs the
  // handler. If every slot is taken (more mappings than kMaxGuarded at once)
  // the mapping is left unguarded: a truncation then ends the process as before.
  MappingGuard(const void* base, size_t size);
  // Unregisters; the caller unmaps afterwards.
  ~MappingGuard();
  MappingGuard(const MappingGuard&) = delete;
  MappingGuard& operator=(const MappingGuard&) = delete;

  bool damaged() const;
  bool guarded() const { return slot_ >= 0; }

  static constexpr int kMaxGuarded = 256;

 private:
  int slot_ = -1;
};

}  // namespace kvg::gguf
