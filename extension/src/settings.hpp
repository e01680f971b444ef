// The kvg.* configuration parameters (GUCs). Read them through these accessors
// only; the engine never sees PostgreSQL's variables.
#pragma once

namespace kvg::pg::settings {

enum class Device { Cpu, Cuda, Auto };

// From _PG_init: defines every kvg.* parameter and reserves the prefix.
void define();

const char* model_path();  // "" when unset
int threads();
Device device();
int max_new_tokens();

// The knowledge flywheel (docs/flywheel.md).
const char* knowledge_template();  // always parses (the check hook refuses others)
bool prefix_reuse();
double transfer_min_similarity();
int transfer_max_entries();

}  // namespace kvg::pg::settings
