// kvg's structures in the server's main shared memory (only when kvg is
// preloaded): each is requested at preload with one LWLock of its own and
// attached by every process at startup; the first to attach finds it zeroed
// and hands it its lock. Used by the audit writer, the engine worker and the
// model fingerprints.
#pragma once

#include <cstddef>
#include <utility>

struct LWLock;  // storage/lwlock.h

namespace kvg::pg {

struct SharedStruct {
  const char* name;     // ShmemInitStruct's key
  const char* tranche;  // its LWLock's tranche
  size_t (*size)();     // asked when the postmaster sizes shared memory (MaxBackends is known then)
  void (*created)(void* memory, LWLock* lock);  // once, on the zeroed structure
  void** where;         // set in every process that attaches
};

// From _PG_init under shared_preload_libraries; `spec` must outlive the server.
void request_shared_struct(const SharedStruct& spec);

// PGPROCs of the server (backends, background workers, auxiliary processes):
// a structure with a request slot per process has this many.
int process_slots();

// A structure T { LWLock* lock; ...; int slot_count; Slot slots[]; } with
// one slot per process (the audit writer's, the engine worker's requests).
template <class T>
SharedStruct per_process_struct(const char* name, const char* tranche, T** where) {
  return {name, tranche,
          [] { return offsetof(T, slots) + sizeof(std::declval<T&>().slots[0]) * size_t(process_slots()); },
          [](void* memory, LWLock* lock) {
            T* t = static_cast<T*>(memory);
            t->lock = lock;
            t->slot_count = process_slots();
          },
          reinterpret_cast<void**>(where)};
}

}  // namespace kvg::pg
