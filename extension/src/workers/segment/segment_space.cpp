// kvg's default for min_dynamic_shared_memory (segment_space.hpp).
#include "extension/src/workers/segment/segment_space.hpp"

#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "utils/guc.h"
}

namespace kvg::pg::segment_space {

void default_at_preload() {
  // PGC_S_DYNAMIC_DEFAULT is the source PostgreSQL gives defaults it works
  // out at start (wal_buffers from shared_buffers): below every source a
  // person sets, so set_config_option leaves their value alone.
  SetConfigOption("min_dynamic_shared_memory", kDefault, PGC_POSTMASTER, PGC_S_DYNAMIC_DEFAULT);
}

}  // namespace kvg::pg::segment_space
