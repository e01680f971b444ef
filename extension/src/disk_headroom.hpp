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
// free space left to reuse, or as soon as an artifact's writes have grown
// pg_largeobject while the filesystem is below it (at most one 4 MB chunk
// later). Space freed inside pg_largeobject by VACUUM is reused without
// growing it, so after the documented procedure artifacts are stored again
// even when VACUUM could not return that space to the filesystem.
#pragma once

#include <cstdint>

namespace kvg::pg::disk_headroom {

// From settings::define(): defines kvg.min_free_disk (superuser, MB; 0: off).
void define_setting();

// pg_largeobject's size in blocks, after refusing (53100) a new artifact
// that could only be stored by growing pg_largeobject on a filesystem that
// is already below kvg.min_free_disk. Call before writing an artifact.
uint32_t check_before_write();

// Refuses (53100) when pg_largeobject has grown past `blocks_at_start` (what
// check_before_write returned) and the filesystem is below the setting.
// Call after each chunk written.
void check_after_write(uint32_t blocks_at_start);

}  // namespace kvg::pg::disk_headroom
