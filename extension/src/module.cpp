// The shared library's identity and load hook. kvg is loaded into the
// postmaster by shared_preload_libraries, so nothing heavy happens at load
// (no model, no CUDA: CUDA does not survive fork()).
#include "extension/src/audit_writer.hpp"
#include "extension/src/device_notice.hpp"
#include "extension/src/engine_worker.hpp"
#include "extension/src/model_fingerprints.hpp"
#include "extension/src/pg_boundary.hpp"
#include "extension/src/settings.hpp"

#include "extension/src/postgres.hpp"

extern "C" {

PG_MODULE_MAGIC;

PGDLLEXPORT void _PG_init(void);

// Plain C calls only: an ERROR raised here has no C++ object to skip.
void _PG_init(void) {
  kvg::pg::engine_worker::define_settings();  // before settings::define() reserves the prefix
  kvg::pg::settings::define();
  kvg::pg::install_boundary({kvg::pg::notice_device_fallback, kvg::pg::forget_device_fallback});
  // The audit writer's shared memory exists only when the postmaster loads
  // kvg (shared_preload_libraries); otherwise CREATE EXTENSION refuses
  // (kvg.require_preload) and audited calls are refused.
  if (process_shared_preload_libraries_in_progress) {
    kvg::pg::audit_writer::setup_at_preload();
    kvg::pg::engine_worker::setup_at_preload();  // the engine worker: engine_worker.hpp
    kvg::pg::model_fingerprints::setup_at_preload();
  }
}

}
