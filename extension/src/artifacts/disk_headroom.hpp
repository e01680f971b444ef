// kvg.min_free_disk: free space kept on the database's filesystem, so that
// VACUUM can still run there and give back the space of deleted artifacts
// (VACUUM itself writes: the visibility map, the free space map, and WAL
// when pg_wal shares the filesystem). A full filesystem is refused by
// PostgreSQL itself (53100) with nothing half-written, but then VACUUM fails
// too; docs/operations.md, "When the disk fills".
//
// Only new artifacts are refused, because only they grow pg_largeobject by
// megabytes at a time; an answer that stores nothing still writes its audit
// row. The refusal is 53100 (disk_full), raised before anything is written
// when the filesystem is already below the setting and pg_largeobject has no
// free space left to reuse: checked when a call starts making an artifact
// and again just before its bytes are handed to the audit writer, which
// writes them (lo_store.hpp). Space freed inside pg_largeobject by VACUUM is reused without
// growing it, so after the documented procedure artifacts are stored again
// even when VACUUM could not return that space to the filesystem.
#pragma once

#include <cstdint>

namespace kvg::pg::disk_headroom {

// From _PG_init (module.cpp): defines kvg.min_free_disk (superuser, MB; 0: off).
void define_settings();

// pg_largeobject's size in blocks, after refusing (53100) a new artifact
// that could only be stored by growing pg_largeobject on a filesystem that
// is below kvg.min_free_disk, or would be after `incoming` more bytes (its
// size, when known). Call before storing an artifact.
uint32_t check_before_write(uint64_t incoming = 0);

}  // namespace kvg::pg::disk_headroom
