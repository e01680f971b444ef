#include "cli/bench/lo_bench.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "cli/clock.hpp"
#include "cli/synth_artifact.hpp"
#include "common/error.hpp"

namespace kvg::cli {

namespace {

constexpr uint64_t kMiB = uint64_t(1) << 20;
constexpr size_t kIoChunk = size_t(4) << 20;  // the extension's large-object chunk: the same-sized calls

double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

template <class F>
double timed(F&& f) {
  const double t0 = now_seconds();
  f();
  return now_seconds() - t0;
}

// Writes back and evicts a file's pages from the OS page cache, as the script
// did with `sync FILE; dd iflag=nocache count=0`. False when it cannot be opened.
bool drop_os_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  ::fsync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  return true;
}

double write_file(const std::string& path, const std::string& bytes, bool sync) {
  const double t0 = now_seconds();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw Error(ErrorCode::Io, "cannot create " + path);
  for (size_t off = 0; off < bytes.size();) {
    const ssize_t w = ::write(fd, bytes.data() + off, std::min(kIoChunk, bytes.size() - off));
    if (w <= 0) {
      ::close(fd);
      throw Error(ErrorCode::Io, "cannot write " + path);
    }
    off += size_t(w);
  }
  if ((sync && ::fsync(fd) != 0) || ::close(fd) != 0) throw Error(ErrorCode::Io, "cannot write " + path);
  return now_seconds() - t0;
}

double read_file(const std::string& path, uint64_t expect) {
  std::vector<char> buf(kIoChunk);
  const double t0 = now_seconds();
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw Error(ErrorCode::Io, "cannot open " + path);
  uint64_t total = 0;
  for (ssize_t r; (r = ::read(fd, buf.data(), buf.size())) > 0;) total += uint64_t(r);
  ::close(fd);
  const double s = now_seconds() - t0;
  if (total != expect) throw Error(ErrorCode::Io, path + " has " + std::to_string(total) + " bytes, not " + std::to_string(expect));
  return s;
}


}  // namespace

LoBench::LoBench(PgConnection& db, std::string dir) : db_(db), dir_(std::move(dir)) {
  db_.exec("SET client_min_messages = warning");  // kvg_artifact_verify notes the unverified provenance
  const std::string data = db_.value("SHOW data_directory");
  for (const char* rel : {"pg_largeobject", "pg_largeobject_loid_pn_index"})
    lo_files_.push_back(data + "/" + db_.value("SELECT pg_relation_filepath($1)", {{rel}}));
  MemorySink warm;
  const SynthArtifact a = write_synth_artifact(65536, 99, warm);
  import(std::string(warm.bytes().begin(), warm.bytes().end()), to_hex(a.id));
  expect_verified(to_hex(a.id));
}

bool LoBench::drop_lo_cache() {
  bool dropped = true;
  for (const std::string& base : lo_files_) {
    dropped = drop_os_cache(base) && dropped;
    for (int seg = 1; std::filesystem::exists(base + "." + std::to_string(seg)); ++seg)
      drop_os_cache(base + "." + std::to_string(seg));
  }
  return dropped;
}

SizeResult LoBench::measure(uint64_t mib, int repeats) {
  MemorySink sink;
  const SynthArtifact a = write_synth_artifact(mib * kMiB, mib, sink);
  const std::string bytes(sink.bytes().begin(), sink.bytes().end());
  sink.bytes().clear();
  sink.bytes().shrink_to_fit();
  const std::string sha = to_hex(a.id);
  const PgParam blob{bytes, true};
  std::vector<double> len, imp, raw, ver, verw, get, fw, fwn, fr, frw;
  const std::string copy = dir_ + "/kvg-bench-store-" + std::to_string(::getpid()) + ".bin";
  for (int rep = 0; rep < repeats; ++rep) {
    len.push_back(timed([&] { db_.value("SELECT length($1::bytea)", {blob}); }));
    imp.push_back(timed([&] { import(bytes, sha); }));
    std::string loid;
    raw.push_back(timed([&] { loid = db_.value("SELECT lo_from_bytea(0, $1::bytea)", {blob}); }));

    drop_lo_cache();
    ver.push_back(timed([&] { expect_verified(sha); }));
    verw.push_back(timed([&] { expect_verified(sha); }));
    drop_lo_cache();
    get.push_back(timed([&] {
      if (db_.value("SELECT length(lo_get($1::oid))", {{loid}}) != std::to_string(bytes.size()))
        throw Error(ErrorCode::Internal, "lo_get returned another size");
    }));
    db_.exec("DELETE FROM kvg.artifacts WHERE sha256 = $1", {{sha}});  // its trigger unlinks the large object
    db_.exec("SELECT lo_unlink($1::oid)", {{loid}});
    db_.exec("VACUUM pg_largeobject");

    fw.push_back(write_file(copy, bytes, true));
    drop_os_cache(copy);
    fr.push_back(read_file(copy, bytes.size()));
    frw.push_back(read_file(copy, bytes.size()));
    std::filesystem::remove(copy);
    fwn.push_back(write_file(copy, bytes, false));
    drop_os_cache(copy);
    std::filesystem::remove(copy);
  }
  SizeResult r;
  r.mib = mib;
  r.bytes = bytes.size();
  r.lo_write = min_of(imp) - min_of(len);
  r.lo_raw_write = min_of(raw) - min_of(len);
  r.file_write = min_of(fw);
  r.file_write_nosync = min_of(fwn);
  r.lo_read = min_of(ver);
  r.lo_read_cached = min_of(verw);
  r.lo_raw_read = min_of(get);
  r.file_read = min_of(fr);
  r.file_read_cached = min_of(frw);
  return r;
}

void LoBench::import(const std::string& bytes, const std::string& sha) {
  // Storage throughput of a synthetic artifact (another model's): stored
  // unverified, as recomputing it is neither possible nor what is measured.
  const std::string got = db_.value("SELECT kvg_import($1::bytea, verify => false)", {{bytes, true}});
  if (got != sha) throw Error(ErrorCode::Internal, "kvg_import returned " + got + ", the artifact is " + sha);
}

void LoBench::expect_verified(const std::string& sha) {
  if (db_.value("SELECT (kvg_artifact_verify($1)).ok", {{sha}}) != "t")
    throw Error(ErrorCode::Internal, "kvg_artifact_verify(" + sha + ") was not true");
}

}  // namespace kvg::cli
