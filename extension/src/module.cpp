// The shared library's identity and load hook. Nothing heavy happens at load
// (no model, no CUDA): the library may be loaded into the postmaster by
// shared_preload_libraries, and CUDA does not survive fork().
#include "extension/src/pg_boundary.hpp"
#include "extension/src/settings.hpp"

#include "extension/src/postgres.hpp"

extern "C" {

PG_MODULE_MAGIC;

PGDLLEXPORT void _PG_init(void);

// Plain C calls only: an ERROR raised here has no C++ object to skip.
void _PG_init(void) {
  kvg::pg::settings::define();
  kvg::pg::install_boundary();
}

}
