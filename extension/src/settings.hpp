// The kvg.* configuration parameters (GUCs). Read them through these accessors
// only; the engine never sees PostgreSQL's variables.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/device.hpp"
#include "engine/recipe.hpp"

namespace kvg::pg::settings {


// From _PG_init: defines every kvg.* parameter and reserves the prefix.
void define();

const char* model_path();  // "" when unset
int64_t max_kv_bytes();    // kvg.max_kv_memory in bytes; 0: unbounded
// kvg.gpu_staging_memory in bytes: all the pinned staging of one backend.
size_t gpu_staging_bytes();
// kvg.threads; InvalidArgument when it exceeds kvg.max_threads.
int threads();
// kvg.max_threads: the cores, unless a superuser allows fewer.
int max_threads();
// The largest import, in bytes (docs/security.md).
uint64_t max_import_bytes();
// kvg.storage_quota in bytes: what the session user may have stored in all
// (0: nothing), as this session sees it (docs/security.md).
uint64_t storage_quota_bytes();
kvg::Device device();
kvg::Recipe recipe();  // kvg.recipe
int max_new_tokens();
// kvg.max_solution_tokens: the longest solution a library entry may hold.
int max_solution_tokens();

// kvg.progress_notices: at most one progress NOTICE per this many
// milliseconds during long work; 0: none.
int progress_notice_ms();

// The knowledge flywheel (docs/flywheel.md).
const char* knowledge_template();  // always parses (the check hook refuses others)
bool prefix_reuse();
// kvg.artifact_cache_memory in bytes (extension/src/artifact_cache.hpp); 0: off.
uint64_t artifact_cache_bytes();
double transfer_min_similarity();
int transfer_max_entries();

// Audit forwarding from a hot standby (docs/scale-out.md).
const char* audit_conninfo();  // "" when unset
int audit_connect_timeout_ms();
bool allow_unaudited();
// kvg.require_exact: non-exact grafts (positional composition) are refused.
bool require_exact();
// kvg.audit_writer_idle_timeout in milliseconds.
int audit_writer_idle_ms();
// kvg.verifier_timeout in milliseconds: a function verifier's worker
// transaction, at most (extension/src/verifier_worker.hpp).
int verifier_timeout_ms();

}  // namespace kvg::pg::settings
