#include "engine/gguf/mapping_guard.hpp"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <mutex>

#include <sys/mman.h>
#include <unistd.h>

namespace kvg::gguf {

namespace {

// A fixed table, so the handler finds a mapping with atomic loads only (no
// locks, no allocation: it runs inside a signal). begin == 0 marks a free slot.
struct Slot {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> damaged{false};
};
Slot slots[MappingGuard::kMaxGuarded];

struct sigaction previous_action;
uintptr_t page_size = 4096;  // read once at install: sysconf is not async-signal-safe
std::once_flag installed;

// Hands a SIGBUS that is not ours to whoever handled it before us.
void chain(int sig, siginfo_t* info, void* context) {
  if (previous_action.sa_flags & SA_SIGINFO) {
    previous_action.sa_sigaction(sig, info, context);
    return;
  }
  if (previous_action.sa_handler != SIG_DFL && previous_action.sa_handler != SIG_IGN) {
    previous_action.sa_handler(sig);
    return;
  }
  // The default action: restore it. A fault re-executes its instruction on
  // return and is then delivered again, now fatally (with its core dump); a
  // SIGBUS sent by kill() is raised again.
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(sig, &fallback, nullptr);
  if (info->si_code <= 0) raise(sig);
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const uintptr_t address = reinterpret_cast<uintptr_t>(info->si_addr);
  if (info->si_code > 0) {  // raised by the kernel for a memory access, not by kill()
    for (Slot& slot : slots) {
      const uintptr_t begin = slot.begin.load(std::memory_order_acquire);
      const uintptr_t end = slot.end.load(std::memory_order_acquire);
      if (begin == 0 || address < begin || address >= end) continue;
      // Zero pages from the faulting one to the end of the mapping: the file
      // was cut at or before this page, so everything after it is gone too,
      // and one remap spares a signal per page.
      const uintptr_t first = address & ~(page_size - 1);
      const uintptr_t last = (end + page_size - 1) & ~(page_size - 1);
      void* p = mmap(reinterpret_cast<void*>(first), last - first, PROT_READ,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
      if (p == MAP_FAILED) break;
      slot.damaged.store(true, std::memory_order_release);
      errno = saved_errno;
      return;  // the read is retried and finds zeros
    }
  }
  errno = saved_errno;
  chain(sig, info, context);
}

void install() {
  page_size = uintptr_t(sysconf(_SC_PAGESIZE));
  struct sigaction action {};
  action.sa_sigaction = on_sigbus;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigaction(SIGBUS, &action, &previous_action);
}

}  // namespace

MappingGuard::MappingGuard(const void* base, size_t size) {
  if (!base || size == 0) return;
  std::call_once(installed, install);
  const uintptr_t begin = reinterpret_cast<uintptr_t>(base);
  for (int i = 0; i < kMaxGuarded; ++i) {
    uintptr_t free_slot = 0;
    if (!slots[i].begin.compare_exchange_strong(free_slot, begin, std::memory_order_acq_rel)) continue;
    slots[i].damaged.store(false, std::memory_order_relaxed);
    slots[i].end.store(begin + size, std::memory_order_release);
    slot_ = i;
    return;
  }
}

MappingGuard::~MappingGuard() {
  if (slot_ < 0) return;
  slots[slot_].end.store(0, std::memory_order_release);
  slots[slot_].begin.store(0, std::memory_order_release);
}

bool MappingGuard::damaged() const {
  return slot_ >= 0 && slots[slot_].damaged.load(std::memory_order_acquire);
}

}  // namespace kvg::gguf
