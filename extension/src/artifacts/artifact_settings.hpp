// The settings of artifact storage: what one import, one role's artifacts and
// one backend's cache of verified artifacts may take (docs/security.md). The
// filesystem headroom, kvg.min_free_disk, is disk_headroom.hpp's.
#pragma once

#include <cstdint>

namespace kvg::pg::settings {

// From _PG_init (module.cpp), before the kvg prefix is reserved.
void define_artifacts();

// kvg.max_import_bytes: the largest import, in bytes.
uint64_t max_import_bytes();
// kvg.storage_quota in bytes: what the session user may have stored in all
// (0: nothing), as this session sees it.
uint64_t storage_quota_bytes();
// kvg.library_storage_quota in bytes: what the library's account
// (lo_store.hpp, Payer::Library) may have stored in all (0: nothing).
uint64_t library_storage_quota_bytes();
// kvg.artifact_cache_memory in bytes (artifact_cache.hpp); 0: off.
uint64_t artifact_cache_bytes();

}  // namespace kvg::pg::settings
