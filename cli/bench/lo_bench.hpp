// Large objects against plain files (kvg bench-store's first part): for an
// artifact of a given size, the write and read throughput of kvg_import /
// kvg_artifact_verify (and of PostgreSQL's bare lo_from_bytea / lo_get)
// against writing and reading the same bytes as a file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/bench/pg_client.hpp"

namespace kvg::cli {

// Best times in seconds for one artifact size.
struct SizeResult {
  uint64_t mib = 0, bytes = 0;
  double lo_write = 0, lo_raw_write = 0, file_write = 0, file_write_nosync = 0;
  double lo_read = 0, lo_read_cached = 0, lo_raw_read = 0, file_read = 0, file_read_cached = 0;
};

class LoBench {
 public:
  // `db`: a database with kvg installed; `dir`: where the plain files go.
  // Imports and verifies a small artifact once, so that loading kvg.so,
  // catalog caches and plans are not timed.
  LoBench(PgConnection& db, std::string dir);

  // Evicts pg_largeobject's files from the OS page cache; false when they
  // cannot be opened from here (another machine, or not readable).
  bool drop_lo_cache();
  // A synth artifact of `mib` MiB, best of `repeats`; leaves nothing stored.
  SizeResult measure(uint64_t mib, int repeats);

 private:
  void import(const std::string& bytes, const std::string& sha);
  void expect_verified(const std::string& sha);

  PgConnection& db_;
  std::string dir_;
  std::vector<std::string> lo_files_;
};

}  // namespace kvg::cli
