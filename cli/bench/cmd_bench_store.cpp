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
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/args.hpp"
#include "cli/bench/lo_bench.hpp"
#include "cli/bench/pg_client.hpp"
#include "cli/clock.hpp"
#include "cli/commands.hpp"
#include "common/error.hpp"
#include "engine/model.hpp"

namespace kvg::cli {

namespace {

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

// A database created for the bench and dropped with everything in it (audit
// rows are append-only, so the bench must not write into a real database).
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
  LoBench bench(db, dir);
  const bool cache_dropped = bench.drop_lo_cache();
  std::vector<SizeResult> rows;
  for (uint64_t mib : sizes) rows.push_back(bench.measure(mib, int(repeat > 0 ? repeat : mib > 256 ? 1 : 3)));
  print_store_tables(rows, cache_dropped);
  std::printf("\n(storage part: %.0f s)\n", now_seconds() - t0);
  if (model) graft_vs_recompute(db, *model, args.get_int("graft-tokens", 2000), threads);
  return 0;
}

}  // namespace kvg::cli
