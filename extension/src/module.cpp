// The shared library's identity and load hook. kvg is loaded into the
// postmaster by shared_preload_libraries, so nothing heavy happens at load
// (no model, no CUDA: CUDA does not survive fork()).
#include "extension/src/artifacts/artifact_settings.hpp"
#include "extension/src/artifacts/disk_headroom.hpp"
#include "extension/src/knowledge/knowledge_settings.hpp"
#include "extension/src/model/device_notice.hpp"
#include "extension/src/model/model_fingerprints.hpp"
#include "extension/src/model/model_settings.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/replica/replica_settings.hpp"
#include "extension/src/calls/call_progress.hpp"
#include "extension/src/workers/engine/engine_worker.hpp"
#include "extension/src/workers/reserved/reserved_workers.hpp"
#include "extension/src/workers/segment/segment_space.hpp"
#include "extension/src/workers/verifier/verifier_worker.hpp"
#include "extension/src/workers/writer/writer.hpp"

#include "extension/src/pg/postgres.hpp"

namespace {

// Each concern defines its own kvg.* settings; then the prefix is reserved,
// so a typo such as SET kvg.treads fails instead of making a new variable.
void define_settings() {
  kvg::pg::settings::define_model();
  kvg::pg::settings::define_artifacts();
  kvg::pg::disk_headroom::define_settings();
  kvg::pg::settings::define_knowledge();
  kvg::pg::settings::define_replica();
  kvg::pg::writer::define_settings();
  kvg::pg::verifier_worker::define_settings();
  kvg::pg::engine_worker::define_settings();
  kvg::pg::reserved::define_settings();
  MarkGUCPrefixReserved("kvg");
}

}  // namespace

extern "C" {

PG_MODULE_MAGIC;

PGDLLEXPORT void _PG_init(void);

// Plain C calls only: an ERROR raised here has no C++ object to skip.
void _PG_init(void) {
  define_settings();
  kvg::pg::install_boundary({kvg::pg::notice_device_fallback, kvg::pg::forget_device_fallback});
  // The audit writer's shared memory exists only when the postmaster loads
  // kvg (shared_preload_libraries); otherwise CREATE EXTENSION refuses
  // (kvg.require_preload) and audited calls are refused.
  if (process_shared_preload_libraries_in_progress) {
    kvg::pg::writer::setup_at_preload();
    kvg::pg::engine_worker::setup_at_preload();  // the engine worker: engine_worker.hpp
    kvg::pg::call_progress::setup_at_preload();  // kvg.progress: calls/call_progress.hpp
    kvg::pg::reserved::setup_at_preload();       // writers' and verifiers' slots: reserved_workers.hpp
    kvg::pg::model_fingerprints::setup_at_preload();
    kvg::pg::segment_space::default_at_preload();  // calls' segments in main shared memory: segment_space.hpp
  }
}

}
