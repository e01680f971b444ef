#include "extension/src/artifacts/disk_headroom.hpp"

#include <sys/statvfs.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string>

#include "common/error.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/pg/sql_raise.hpp"
#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "access/table.h"
#include "catalog/pg_largeobject.h"
#include "common/relpath.h"
#include "storage/bufmgr.h"
#include "storage/freespace.h"
#include "storage/large_object.h"
#include "utils/rel.h"
}

namespace kvg::pg::disk_headroom {

namespace {

int min_free_disk_mb = 1024;  // as max_wal_size's default: room for VACUUM's WAL when pg_wal shares the filesystem

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

// Bytes the server's user may still write on that filesystem.
uint64_t free_bytes(const std::string& dir) {
  struct statvfs fs;
  if (statvfs(dir.c_str(), &fs) != 0)
    throw Error(ErrorCode::Io, "statvfs(\"" + dir + "\") failed: " + strerror(errno));
  return uint64_t(fs.f_bavail) * fs.f_frsize;
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

[[noreturn]] void refuse(const std::string& dir, uint64_t free) {
  raise_sqlstate("53100",
                 "kvg refuses to store a new artifact: the filesystem of " + dir + " has " +
                     std::to_string(free >> 20) + " MB free, less than kvg.min_free_disk (" +
                     std::to_string(min_free_disk_mb) + " MB)",
                 "Delete artifacts that are no longer needed (kvg_artifact_delete), then run VACUUM "
                 "pg_largeobject, which needs the space kept free: docs/operations.md, \"When the disk fills\".",
                 "The space below kvg.min_free_disk is kept for VACUUM; calls that store no artifact still work.");
}

}  // namespace

void define_settings() {
  DefineCustomIntVariable("kvg.min_free_disk",
                          "Free space kvg keeps on the database's filesystem: below it, new artifacts are refused "
                          "(53100).",
                          "Kept for VACUUM, which needs free space to give back the space of deleted artifacts. "
                          "0: off.",
                          &min_free_disk_mb, 1024, 0, INT_MAX, PGC_SUSET, GUC_UNIT_MB, nullptr, nullptr, nullptr);
}

uint32_t check_before_write(uint64_t incoming) {
  if (min_free_disk_mb == 0) return large_object_space(false).blocks;
  const std::string dir = database_directory();
  const uint64_t free = free_bytes(dir);
  const bool short_of_space = free < min_free_bytes() + incoming;
  const LargeObjectSpace lo = large_object_space(short_of_space);
  if (short_of_space && !lo.reusable) refuse(dir, free);
  return lo.blocks;
}

}  // namespace kvg::pg::disk_headroom
