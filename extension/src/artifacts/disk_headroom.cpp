#include "extension/src/artifacts/disk_headroom.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <string>

#include "common/error.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/pg/sql_raise.hpp"
#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "access/table.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "catalog/pg_largeobject.h"
#include "common/relpath.h"
#include "storage/bufmgr.h"
#include "storage/freespace.h"
#include "storage/large_object.h"
#include "utils/rel.h"
}

namespace kvg::pg::disk_headroom {

namespace {

// As max_wal_size's default: the margin beyond what WAL may still claim
// (below), for WAL past its soft limit and for VACUUM's maps.
int min_free_disk_mb = 1024;

uint64_t min_free_bytes() { return uint64_t(min_free_disk_mb) << 20; }

// The directory of this database in its default tablespace, where
// pg_largeobject lives: $PGDATA/base/<oid>, or a tablespace's directory
// (pg_tblspc/<oid>/... is a symbolic link, which statvfs follows).
std::string database_directory() {
  char* relative = call([] { return GetDatabasePath(MyDatabaseId, MyDatabaseTableSpace); });
  std::string path = std::string(DataDir) + "/" + relative;
  call([relative] { pfree(relative); });
  return path;
}

// A filesystem as the check sees it: bytes the server's user may still
// write there (statvfs), and which device it is, to tell whether pg_wal and
// the database share it.
struct Filesystem {
  std::string dir;
  uint64_t free = 0;
  dev_t device = 0;
};

Filesystem filesystem_of(const std::string& dir) {
  struct statvfs fs;
  struct stat st;
  if (statvfs(dir.c_str(), &fs) != 0 || stat(dir.c_str(), &st) != 0)
    throw Error(ErrorCode::Io, "statvfs(\"" + dir + "\") failed: " + strerror(errno));
  return Filesystem{dir, uint64_t(fs.f_bavail) * fs.f_frsize, st.st_dev};
}

// Bytes pg_wal may still grow by before checkpoints hold it at
// max_wal_size (or wal_keep_size, when larger): segments already in pg_wal,
// recycled ones included, are rewritten in place and take nothing more from
// the filesystem; new ones do. Storing an artifact writes about its size of
// WAL, and so does deleting it and vacuuming it away, so this is kept free
// for WAL on pg_wal's filesystem (a WAL write that does not fit is a PANIC,
// not an error: docs/operations.md, "When the disk fills").
// The most pg_wal holds before checkpoints hold it back.
uint64_t wal_limit_bytes() { return uint64_t(std::max(max_wal_size_mb, wal_keep_size_mb)) << 20; }

uint64_t wal_growth_left(const std::string& wal_dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(wal_dir.c_str()), closedir);
  if (!dir) throw Error(ErrorCode::Io, "cannot list " + wal_dir + ": " + strerror(errno));
  uint64_t segments = 0;
  while (const dirent* entry = readdir(dir.get()))
    if (IsXLogFileName(entry->d_name)) ++segments;
  const uint64_t present = segments * uint64_t(wal_segment_size);
  const uint64_t limit = wal_limit_bytes();
  return limit > present ? limit - present : 0;
}

struct LargeObjectSpace {
  uint32_t blocks = 0;
  bool reusable = false;  // the free space map offers a page for a full 2 KB chunk
};

LargeObjectSpace large_object_space(bool ask_free_space_map) {
  return call([ask_free_space_map] {
    Relation rel = table_open(LargeObjectRelationId, AccessShareLock);
    LargeObjectSpace s;
    s.blocks = RelationGetNumberOfBlocks(rel);
    if (ask_free_space_map)
      s.reusable = GetPageWithFreeSpace(rel, LOBLKSIZE + MAXALIGN(SizeofHeapTupleHeader) + 64) != InvalidBlockNumber;
    table_close(rel, AccessShareLock);
    return s;
  });
}

[[noreturn]] void refuse(const Filesystem& fs, uint64_t kept_for_wal) {
  const std::string wal =
      kept_for_wal ? "; WAL may still take " + std::to_string(kept_for_wal >> 20) + " MB of it (max_wal_size)," +
                         " which leaves"
                   : ",";
  raise_sqlstate("53100",
                 "kvg refuses to store a new artifact: the filesystem of " + fs.dir + " has " +
                     std::to_string(fs.free >> 20) + " MB free" + wal + " less than kvg.min_free_disk (" +
                     std::to_string(min_free_disk_mb) + " MB)",
                 "Delete artifacts that are no longer needed (kvg_artifact_delete) in batches with a CHECKPOINT "
                 "after each, then run VACUUM pg_largeobject, in the space kept free: docs/operations.md, \"When "
                 "the disk fills\".",
                 "The space below kvg.min_free_disk is kept for WAL and VACUUM; calls that store no artifact still "
                 "work.");
}

}  // namespace

void define_settings() {
  DefineCustomIntVariable("kvg.min_free_disk",
                          "Free space kvg keeps on the database's filesystem and pg_wal's: below it, new artifacts are "
                          "refused (53100).",
                          "Kept for WAL and VACUUM, which need free space to give back the space of deleted "
                          "artifacts; on pg_wal's filesystem, on top of what WAL may still take up to max_wal_size. "
                          "0: off.",
                          &min_free_disk_mb, 1024, 0, INT_MAX, PGC_SUSET, GUC_UNIT_MB, nullptr, nullptr, nullptr);
}

uint32_t check_before_write(uint64_t incoming) {
  if (min_free_disk_mb == 0) return large_object_space(false).blocks;
  const Filesystem database = filesystem_of(database_directory());
  const Filesystem wal = filesystem_of(std::string(DataDir) + "/" + XLOGDIR);
  const bool shared = wal.device == database.device;
  const uint64_t margin = min_free_bytes();
  // Listing pg_wal only when the reserve could matter: it is at most max_wal_size.
  const uint64_t kept_for_wal = wal.free < margin + incoming + wal_limit_bytes() ? wal_growth_left(wal.dir) : 0;
  // A filesystem holding pg_wal alone gains nothing from pages VACUUM freed
  // in pg_largeobject: the artifact's WAL is written all the same.
  if (!shared && wal.free < margin + kept_for_wal) refuse(wal, kept_for_wal);
  const uint64_t database_reserve = shared ? kept_for_wal : 0;
  const bool short_of_space = database.free < margin + incoming + database_reserve;
  // Reusing pages grows no file; its WAL is within the reserve kept above.
  const LargeObjectSpace lo = large_object_space(short_of_space);
  if (short_of_space && !lo.reusable) refuse(database, database_reserve);
  return lo.blocks;
}

bool room_for_file(const std::string& dir, uint64_t bytes) {
  if (min_free_disk_mb == 0) return true;
  const Filesystem target = filesystem_of(dir);
  const Filesystem wal = filesystem_of(std::string(DataDir) + "/" + XLOGDIR);
  const uint64_t reserve = target.device == wal.device ? wal_growth_left(wal.dir) : 0;
  return target.free >= min_free_bytes() + reserve + bytes;
}

}  // namespace kvg::pg::disk_headroom
