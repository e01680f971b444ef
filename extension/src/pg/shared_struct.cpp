#include "extension/src/pg/shared_struct.hpp"

#include <cstring>
#include <vector>

#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
}

namespace kvg::pg {

namespace {

std::vector<const SharedStruct*>& registered() {
  static std::vector<const SharedStruct*> specs;
  return specs;
}
shmem_request_hook_type previous_request = nullptr;
shmem_startup_hook_type previous_startup = nullptr;

void request_all() {
  if (previous_request) previous_request();
  for (const SharedStruct* s : registered()) {
    RequestAddinShmemSpace(s->size());
    RequestNamedLWLockTranche(s->tranche, 1);
  }
}

void attach_all() {
  if (previous_startup) previous_startup();
  LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
  for (const SharedStruct* s : registered()) {
    bool found = false;
    void* memory = ShmemInitStruct(s->name, s->size(), &found);
    if (!found) {
      std::memset(memory, 0, s->size());
      s->created(memory, &GetNamedLWLockTranche(s->tranche)->lock);
    }
    *s->where = memory;
  }
  LWLockRelease(AddinShmemInitLock);
}

}  // namespace

int process_slots() { return MaxBackends + NUM_AUXILIARY_PROCS; }

void request_shared_struct(const SharedStruct& spec) {
  if (registered().empty()) {
    previous_request = shmem_request_hook;
    shmem_request_hook = request_all;
    previous_startup = shmem_startup_hook;
    shmem_startup_hook = attach_all;
  }
  registered().push_back(&spec);
}

}  // namespace kvg::pg
