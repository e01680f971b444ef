// kvg.min_free_disk: free space kept on the database's filesystem and on
// pg_wal's, so that the documented procedure (delete artifacts in batches,
// CHECKPOINT, VACUUM) can still run there and give back the space of
// deleted artifacts: VACUUM writes its maps, and every step writes WAL. A
// full data filesystem is refused by PostgreSQL itself (53100) with nothing
// half-written, but a WAL write that does not fit stops the server (PANIC).
// docs/operations.md, "When the disk fills".
//
// On pg_wal's filesystem, what WAL may still claim before checkpoints hold
// it at max_wal_size is kept free on top of the setting: storing an
// artifact writes its size in WAL, and so does deleting and vacuuming it.
//
// Only new artifacts are refused, because only they grow pg_largeobject by
// megabytes at a time; an answer that stores nothing still writes its audit
// row. The refusal is 53100 (disk_full), raised before anything is written,
// when a filesystem is below the setting: checked when a call starts making
// an artifact and again just before its bytes are handed to the audit
// writer, which writes them (lo_store.hpp). Space freed inside
// pg_largeobject by VACUUM is reused without growing it, so after the
// procedure artifacts are stored again on the database's filesystem even
// when VACUUM could not return that space to it.
#pragma once

#include <cstdint>
#include <string>

namespace kvg::pg::disk_headroom {

// From _PG_init (module.cpp): defines kvg.min_free_disk (superuser, MB; 0: off).
void define_settings();

// pg_largeobject's size in blocks, after refusing (53100) a new artifact
// when pg_wal's filesystem is below kvg.min_free_disk beyond WAL's reserve,
// or when the artifact could only be stored by growing pg_largeobject on a
// filesystem that is below it, or would be after `incoming` more bytes (its
// size, when known). Call before storing an artifact.
uint32_t check_before_write(uint64_t incoming = 0);

// Whether writing `bytes` into `dir` leaves its filesystem kvg.min_free_disk
// free, and WAL's reserve too when pg_wal shares it. For the engine worker's
// KV files (engine/mapped_kv_files.hpp): a cache that calls can do without,
// so it gives way first (a chain is then copied instead of mapped). Io when
// a filesystem cannot be examined.
bool room_for_file(const std::string& dir, uint64_t bytes);

}  // namespace kvg::pg::disk_headroom
