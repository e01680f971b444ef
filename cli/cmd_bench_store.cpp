// kvg bench-store: issue #4's measurement, formerly scripts/bench-lo.sh.
// Large-object write and read throughput of artifacts of growing size against
// plain file I/O of the same bytes, and grafting a long prefix from its large
// object against recomputing it, on a PostgreSQL server with kvg installed.
//
// Everything runs in a scratch database created on the server and dropped at
// the end (the audit trail is append-only, so nothing is left in a real one).
// Times are taken on this client's clock around one statement each (the
// commit included); an artifact travels as a binary bytea parameter, and the
// same statement with length($1) instead of kvg_import($1) is subtracted, so
// the transfer is not counted as a write. Reads follow dropping the OS page
// cache of pg_largeobject's files when this process may open them;
// shared_buffers are not dropped.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/args.hpp"
#include "cli/clock.hpp"
#include "cli/commands.hpp"
#include "cli/pg_client.hpp"
#include "cli/synth_artifact.hpp"
#include "common/error.hpp"
#include "engine/model.hpp"

namespace kvg::cli {

namespace {

constexpr uint64_t kMiB = uint64_t(1) << 20;
constexpr size_t kIoChunk = size_t(4) << 20;  // the extension's large-object chunk, and the script's dd bs=4M

double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

std::string mb_per_s(uint64_t bytes, double seconds) {
  if (seconds <= 0) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", double(bytes) / seconds / 1e6);
  return buf;
}

std::string ratio(double a_seconds, double b_seconds) {  // throughput a / throughput b
  if (a_seconds <= 0 || b_seconds <= 0) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", b_seconds / a_seconds);
  return buf;
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

// A database created for the bench and dropped with everything in it.
class ScratchDatabase {
 public:
  explicit ScratchDatabase(const std::string& conninfo)
      : admin_(conninfo), name_("kvg_bench_store_" + std::to_string(::getpid())) {
    admin_.exec("SET client_min_messages = warning");
    admin_.exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
    admin_.exec("CREATE DATABASE " + name_);
  }
  ~ScratchDatabase() {
    try {
      admin_.exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
    } catch (...) {
      std::fprintf(stderr, "kvg bench-store: could not drop the scratch database %s\n", name_.c_str());
    }
  }
  const std::string& name() const { return name_; }

 private:
  PgConnection admin_;
  std::string name_;
};

struct SizeResult {
  uint64_t mib = 0, bytes = 0;
  double lo_write = 0, lo_raw_write = 0, file_write = 0, file_write_nosync = 0;
  double lo_read = 0, lo_read_cached = 0, lo_raw_read = 0, file_read = 0, file_read_cached = 0;
};

class StoreBench {
 public:
  StoreBench(PgConnection& db, std::string dir) : db_(db), dir_(std::move(dir)) {
    const std::string data = db_.value("SHOW data_directory");
    for (const char* rel : {"pg_largeobject", "pg_largeobject_loid_pn_index"})
      lo_files_.push_back(data + "/" + db_.value("SELECT pg_relation_filepath($1)", {{rel}}));
    // Loading kvg.so, catalog caches and plans: once, untimed.
    MemorySink warm;
    const SynthArtifact a = write_synth_artifact(65536, 99, warm);
    import(std::string(warm.bytes().begin(), warm.bytes().end()), to_hex(a.id));
    db_.value("SELECT kvg_artifact_verify($1)", {{to_hex(a.id)}});
  }

  // False when the OS cache of pg_largeobject could not be dropped (the
  // server's files are not readable by this process).
  bool drop_lo_cache() {
    bool dropped = true;
    for (const std::string& base : lo_files_) {
      dropped = drop_os_cache(base) && dropped;
      for (int seg = 1; std::filesystem::exists(base + "." + std::to_string(seg)); ++seg)
        drop_os_cache(base + "." + std::to_string(seg));
    }
    return dropped;
  }

  SizeResult measure(uint64_t mib, int repeats) {
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
      ver.push_back(timed([&] { expect_true(sha); }));
      verw.push_back(timed([&] { expect_true(sha); }));
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

 private:
  template <class F>
  static double timed(F&& f) {
    const double t0 = now_seconds();
    f();
    return now_seconds() - t0;
  }
  void import(const std::string& bytes, const std::string& sha) {
    const std::string got = db_.value("SELECT kvg_import($1::bytea)", {{bytes, true}});
    if (got != sha) throw Error(ErrorCode::Internal, "kvg_import returned " + got + ", the artifact is " + sha);
  }
  void expect_true(const std::string& sha) {
    if (db_.value("SELECT kvg_artifact_verify($1)", {{sha}}) != "t")
      throw Error(ErrorCode::Internal, "kvg_artifact_verify(" + sha + ") was not true");
  }

  PgConnection& db_;
  std::string dir_;
  std::vector<std::string> lo_files_;
};

std::vector<uint64_t> parse_sizes(const std::string& text) {
  std::vector<uint64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t end = std::min(text.find(',', pos), text.size());
    uint64_t n = 0;
    const auto [ptr, ec] = std::from_chars(text.data() + pos, text.data() + end, n);
    if (ec != std::errc() || ptr != text.data() + end || n < 1 || n > 1000)
      throw Error(ErrorCode::InvalidArgument, "--sizes must be MiB counts in 1..1000 (a bytea holds less than 1 GiB), "
                                              "comma-separated, got '" + text + "'");
    out.push_back(n);
    pos = end + 1;
  }
  return out;
}

void print_store_tables(const std::vector<SizeResult>& rows, bool cache_dropped) {
  std::printf("Large objects vs plain files (MB/s = 10^6 bytes/s; best of --repeat; ratio = LO / file).\n");
  std::printf("LO write: kvg_import($1) minus length($1) of the same binary parameter; LO read: kvg_artifact_verify\n");
  std::printf("(re-hash) after %s (shared_buffers may still hold part of it).\n",
              cache_dropped ? "dropping pg_largeobject's OS page cache"
                            : "NOT dropping pg_largeobject's OS page cache (its files are not readable here)");
  std::printf("File write: 4 MiB writes + fsync to a new file in --dir; file read: 4 MiB reads after dropping its OS page cache.\n\n");
  std::printf("| size | bytes | LO write MB/s | file write MB/s | ratio | LO read MB/s | file read MB/s | ratio |\n");
  std::printf("|------|------:|--------------:|----------------:|------:|-------------:|---------------:|------:|\n");
  for (const SizeResult& r : rows)
    std::printf("| %llu MiB | %llu | %s | %s | %s | %s | %s | %s |\n", (unsigned long long)r.mib,
                (unsigned long long)r.bytes, mb_per_s(r.bytes, r.lo_write).c_str(),
                mb_per_s(r.bytes, r.file_write).c_str(), ratio(r.lo_write, r.file_write).c_str(),
                mb_per_s(r.bytes, r.lo_read).c_str(), mb_per_s(r.bytes, r.file_read).c_str(),
                ratio(r.lo_read, r.file_read).c_str());
  std::printf("\nThe parts: PostgreSQL's large objects without kvg (lo_from_bytea minus length; length(lo_get) after\n");
  std::printf("dropping the OS cache), writes without fsync, and reads with everything cached. MB/s.\n\n");
  std::printf("| size | LO write, kvg_import | LO write, lo_from_bytea | file write, fsync | file write, no fsync "
              "| LO read, kvg_artifact_verify | LO read, lo_get | file read | LO read, cached | file read, cached |\n");
  std::printf("|------|------:|------:|------:|------:|------:|------:|------:|------:|------:|\n");
  for (const SizeResult& r : rows)
    std::printf("| %llu MiB | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", (unsigned long long)r.mib,
                mb_per_s(r.bytes, r.lo_write).c_str(), mb_per_s(r.bytes, r.lo_raw_write).c_str(),
                mb_per_s(r.bytes, r.file_write).c_str(), mb_per_s(r.bytes, r.file_write_nosync).c_str(),
                mb_per_s(r.bytes, r.lo_read).c_str(), mb_per_s(r.bytes, r.lo_raw_read).c_str(),
                mb_per_s(r.bytes, r.file_read).c_str(), mb_per_s(r.bytes, r.lo_read_cached).c_str(),
                mb_per_s(r.bytes, r.file_read_cached).c_str());
}

// Graft a long prefix from its large object vs recompute it, one token each,
// best of 3 alternating rounds; the outputs must be equal.
void graft_vs_recompute(PgConnection& db, const std::string& model_path, int64_t target_tokens, int threads) {
  const std::string sentence =
      "Once upon a time, there was a little girl named Lily. She had a red ball and a small dog named Max.";
  const auto model = Model::load(model_path);
  std::string prefix = sentence;
  while (true) {  // the longest repetition of the sentence within target_tokens
    const std::string longer = prefix + " " + sentence;
    if (int64_t(model->tokenizer().encode_with_bos(longer).size()) > target_tokens) break;
    prefix = longer;
  }
  db.exec("SELECT set_config('kvg.model', $1, false)", {{model_path}});
  db.exec("SELECT set_config('kvg.threads', $1, false)", {{std::to_string(threads)}});
  // Off for both runs: the recompute must not graft the stored prefix by
  // itself; the graft run names its artifact explicitly.
  db.exec("SET kvg.prefix_reuse = off");
  const std::string sha = db.value("SELECT kvg_capture($1)", {{prefix}});
  const auto info = db.exec("SELECT n_tokens, bytes FROM kvg.artifacts WHERE sha256 = $1", {{sha}}).at(0);
  const std::string graft_sql = "SELECT kvg_generate(' One day', 1, artifact => $1)";
  const std::string full_sql = "SELECT kvg_generate($1 || ' One day', 1)";
  db.value(graft_sql, {{sha}});  // warm-up: model loaded, caches filled
  db.value(full_sql, {{prefix}});
  double best_graft = 1e300, best_full = 1e300;
  std::vector<std::string> outputs;
  for (int round = 0; round < 3; ++round) {
    double t0 = now_seconds();
    outputs.push_back(db.value(graft_sql, {{sha}}));
    best_graft = std::min(best_graft, now_seconds() - t0);
    t0 = now_seconds();
    outputs.push_back(db.value(full_sql, {{prefix}}));
    best_full = std::min(best_full, now_seconds() - t0);
  }
  const bool equal = std::all_of(outputs.begin(), outputs.end(), [&](const std::string& o) { return o == outputs[0]; });
  const auto g = db.exec("SELECT tokens_in, tokens_grafted FROM kvg.audit WHERE operation = 'generate' "
                         "AND artifact_sha256 = $1 ORDER BY id DESC LIMIT 1", {{sha}}).at(0);
  const auto r = db.exec("SELECT tokens_in, coalesce(tokens_grafted, 0) FROM kvg.audit WHERE operation = 'generate' "
                         "AND artifact_sha256 IS NULL ORDER BY id DESC LIMIT 1").at(0);
  std::printf("\nGraft from a large object vs recompute: %s, kvg.threads = %d, best of 3\n",
              std::filesystem::path(model_path).filename().c_str(), threads);
  std::printf("(each time on the client's clock around one SELECT kvg_generate(...), commit and audit row included).\n\n");
  std::printf("| run | prompt tokens | grafted | ms | output |\n");
  std::printf("|-----|--------------:|--------:|---:|--------|\n");
  std::printf("| graft from the large object + 1 token | %s | %s | %.1f | %s |\n", g[0].c_str(), g[1].c_str(),
              best_graft * 1e3, ("\"" + json_escape(outputs[0]) + "\"").c_str());
  std::printf("| recompute (kvg.prefix_reuse = off) + 1 token | %s | %s | %.1f | %s |\n", r[0].c_str(), r[1].c_str(),
              best_full * 1e3, ("\"" + json_escape(outputs[1]) + "\"").c_str());
  std::printf("\nspeed-up (recompute / graft): %.2fx; outputs equal in all 3 rounds: %s\n", best_full / best_graft,
              equal ? "true" : "false");
  std::printf("prefix: %s tokens (the sentence \"%s...\" repeated), artifact %s bytes, %s...\n", info[0].c_str(),
              sentence.substr(0, 30).c_str(), info[1].c_str(), sha.substr(0, 16).c_str());
  if (!equal) throw Error(ErrorCode::Internal, "the grafted and recomputed outputs differ");
}

}  // namespace

int cmd_bench_store(const Args& args) {
  const std::vector<uint64_t> sizes = parse_sizes(args.opt("sizes").value_or("1,16,256,1000"));
  const int64_t repeat = args.get_int("repeat", 0);  // 0: 3, one run above 256 MiB
  if (args.has("repeat") && repeat < 1) throw Error(ErrorCode::InvalidArgument, "--repeat must be at least 1");
  const std::string dir = args.opt("dir").value_or("/tmp");
  std::optional<std::string> model;
  if (args.has("model")) model = std::filesystem::absolute(args.get("model")).string();  // the server opens it
  const int threads = int(args.get_int("threads", 2));

  const std::string conninfo = args.opt("db").value_or("");
  ScratchDatabase scratch(conninfo);
  PgConnection db(conninfo, scratch.name());
  db.exec("SET client_min_messages = warning");
  db.exec("CREATE EXTENSION kvg");
  std::printf("command: kvg bench-store\n");
  std::printf("server: %s, shared_buffers %s, fsync %s, synchronous_commit %s, full_page_writes %s\n\n",
              db.value("SELECT split_part(version(), ' ', 1) || ' ' || split_part(version(), ' ', 2)").c_str(),
              db.value("SHOW shared_buffers").c_str(), db.value("SHOW fsync").c_str(),
              db.value("SHOW synchronous_commit").c_str(), db.value("SHOW full_page_writes").c_str());
  std::fflush(stdout);

  const double t0 = now_seconds();
  StoreBench bench(db, dir);
  const bool cache_dropped = bench.drop_lo_cache();
  std::vector<SizeResult> rows;
  for (uint64_t mib : sizes) rows.push_back(bench.measure(mib, int(repeat > 0 ? repeat : mib > 256 ? 1 : 3)));
  print_store_tables(rows, cache_dropped);
  std::printf("\n(storage part: %.0f s)\n", now_seconds() - t0);
  if (model) graft_vs_recompute(db, *model, args.get_int("graft-tokens", 2000), threads);
  return 0;
}

}  // namespace kvg::cli
