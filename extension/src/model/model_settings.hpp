// The settings of the model and of every engine call (kvg.model, kvg.threads,
// kvg.recipe, ...). Read them through these accessors only; the engine never
// sees PostgreSQL's variables. Other concerns define their own settings
// (artifacts/artifact_settings.hpp, knowledge/knowledge_settings.hpp,
// replica/replica_settings.hpp, each worker), all in the namespace
// kvg::pg::settings or their worker's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/device.hpp"
#include "engine/recipe.hpp"

namespace kvg::pg::settings {

// From _PG_init (module.cpp), before the kvg prefix is reserved.
void define_model();

const char* model_path();  // "" when unset
// model_path(), after reading the configuration files when it is unset: a
// reload just asked for (pg_reload_conf()) may not have reached this backend.
const char* model_path_after_reload();
int64_t max_kv_bytes();    // kvg.max_kv_memory in bytes; 0: unbounded
// kvg.gpu_staging_memory in bytes: all the pinned staging of one backend.
size_t gpu_staging_bytes();
// kvg.threads; InvalidArgument when it exceeds kvg.max_threads.
int threads();
// kvg.max_threads: the cores, unless a superuser allows fewer.
int max_threads();
kvg::Device device();
kvg::Recipe recipe();  // kvg.recipe
int max_new_tokens();
// kvg.max_context: the most positions one call's context may reach (0: the
// model's context_length), as EngineOptions::context_limit takes it.
int64_t max_context();

// kvg.progress_notices: at most one progress NOTICE per this many
// milliseconds during long work; 0: none.
int progress_notice_ms();

// kvg.prefix_reuse: graft the longest stored chain that begins a prompt.
bool prefix_reuse();
// kvg.require_exact: non-exact grafts (positional composition) are refused.
bool require_exact();

}  // namespace kvg::pg::settings
