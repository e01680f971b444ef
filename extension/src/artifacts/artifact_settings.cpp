// Who may change what (all superuser: each bounds a server's resources):
//  kvg.max_import_bytes  the largest artifact one kvg_import takes.
//  kvg.storage_quota     (and per role, ALTER ROLE ... SET) how many bytes of
//                        artifacts one role may have stored, charged to the
//                        session user, so that SET ROLE opens no new bucket
//                        (kvg.storage_usage shows it; docs/security.md).
//  kvg.artifact_cache_memory
//                        memory each backend may keep verified artifacts in
//                        (artifact_cache.hpp), a server's memory times its
//                        backends; 0 turns the cache off. Speed only.
#include "extension/src/artifacts/artifact_settings.hpp"

#include "extension/src/pg/postgres.hpp"

namespace kvg::pg::settings {

namespace {

int max_import_kb = 1 << 20;      // 1 GB
int storage_quota_kb = 10 << 20;  // 10 GB
int library_storage_quota_kb = 10 << 20;  // 10 GB
int artifact_cache_kb = 128 << 10;  // 128 MB

}  // namespace

void define_artifacts() {
  DefineCustomIntVariable("kvg.max_import_bytes", "The largest artifact kvg_import accepts.", nullptr, &max_import_kb,
                          1 << 20, 1, INT_MAX, PGC_SUSET, GUC_UNIT_KB, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("kvg.storage_quota", "Bytes of artifacts one role may have stored.",
                          "Charged to the session user; set per role with ALTER ROLE ... SET kvg.storage_quota; "
                          "see kvg.storage_usage.",
                          &storage_quota_kb, 10 << 20, 0, INT_MAX, PGC_SUSET, GUC_UNIT_KB, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("kvg.library_storage_quota",
                          "Bytes of chain links composed from the library that answers may have stored.",
                          "Charged to the library, not the asker; past it an answer stores no links and is still "
                          "answered.",
                          &library_storage_quota_kb, 10 << 20, 0, INT_MAX, PGC_SUSET, GUC_UNIT_KB, nullptr, nullptr,
                          nullptr);
  DefineCustomIntVariable("kvg.artifact_cache_memory",
                          "Memory each backend may keep verified artifacts in, so a recurring graft does not read "
                          "and hash them again (0: off).",
                          "Least recently used first out; the view kvg.artifact_cache shows its use.",
                          &artifact_cache_kb, 128 << 10, 0, INT_MAX, PGC_SUSET, GUC_UNIT_KB, nullptr, nullptr,
                          nullptr);
}

uint64_t max_import_bytes() { return uint64_t(max_import_kb) * 1024; }
uint64_t storage_quota_bytes() { return uint64_t(storage_quota_kb) * 1024; }
uint64_t library_storage_quota_bytes() { return uint64_t(library_storage_quota_kb) * 1024; }
uint64_t artifact_cache_bytes() { return uint64_t(artifact_cache_kb) * 1024; }

}  // namespace kvg::pg::settings
