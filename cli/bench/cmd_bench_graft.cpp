// kvg bench-graft: what grafting a stored prefix saves over recomputing it
// (issue #3), and what the content-addressed store costs over plain file I/O.
// Every row also proves the saving is free: the following token's logits from
// the grafted context must equal the monolithic recompute's, byte for byte.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cli/args.hpp"
#include "cli/bench/bench_support.hpp"
#include "cli/clock.hpp"
#include "cli/commands.hpp"
#include "cli/engine_flags.hpp"
#include "cli/progress_line.hpp"
#include "cli/version.hpp"
#include "common/error.hpp"
#include "engine/graft.hpp"
#include "engine/sampler.hpp"
#include "storage/file_store.hpp"

namespace kvg::cli {

namespace {

// The store's own copy chunk, so plain I/O issues the same-sized syscalls.
constexpr size_t kIoChunk = size_t(1) << 20;

// 64, 128, 256, ... below `limit` - 1, then `limit` - 1 itself: the longest
// prefix that still leaves room for the following token.
std::vector<int64_t> default_lengths(int64_t limit) {
  std::vector<int64_t> out;
  for (int64_t n = 64; n < limit - 1; n *= 2) out.push_back(n);
  out.push_back(limit - 1);
  return out;
}

bool same_bytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void remove_file(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove(path, ec);
  if (ec) throw Error(ErrorCode::Io, "cannot remove '" + path + "': " + ec.message());
}

// Reads `src` to its end in kIoChunk reads; returns the byte count.
uint64_t drain(ByteSource& src, std::vector<uint8_t>& buf) {
  uint64_t total = 0;
  for (size_t r; (r = src.read(buf.data(), buf.size())) > 0;) total += r;
  return total;
}

struct Row {
  int64_t tokens = 0;
  uint64_t bytes = 0;
  double capture_s = 1e300, graft_s = 1e300, recompute_s = 1e300;  // best of the repeats
  GraftTimes split;      // of the best graft: where its time went
  double decode_s = 0;   // of the best graft: the one token after it
  bool exact = true;                                                // every repeat
};

struct IoResult {
  double put_s = 1e300, write_s = 1e300, get_s = 1e300, read_s = 1e300;
};

// The store against plain file I/O of the same bytes in the same directory.
// Both reads come from the page cache (the file was just written), which is
// where the store's hash verification shows most.
IoResult measure_io(FileStore& store, const std::string& dir, const std::vector<uint8_t>& artifact,
                    const Digest& id, int repeat) {
  const std::string source_path = dir + "/artifact.src";
  const std::string plain_path = store.dir() + "/plain.bin";
  {
    FileSink sink(source_path);
    sink.write(artifact.data(), artifact.size());
    sink.close(true);
  }
  std::vector<uint8_t> buf(kIoChunk);
  IoResult r;
  for (int rep = 0; rep < repeat; ++rep) {
    // A put of content already present skips the rename; time the full path.
    remove_file(store.path_of(id));
    double t0 = now_seconds();
    {
      FileSource source(source_path);
      if (store.put(source) != id) throw Error(ErrorCode::Internal, "the store hashed the artifact differently");
    }
    r.put_s = std::min(r.put_s, now_seconds() - t0);

    remove_file(plain_path);
    t0 = now_seconds();
    {
      FileSink sink(plain_path);
      for (size_t off = 0; off < artifact.size(); off += kIoChunk)
        sink.write(artifact.data() + off, std::min(kIoChunk, artifact.size() - off));
      sink.close(true);
    }
    r.write_s = std::min(r.write_s, now_seconds() - t0);

    t0 = now_seconds();
    {
      auto source = store.get(id);  // throws at the end unless the hash matches
      if (drain(*source, buf) != artifact.size()) throw Error(ErrorCode::Internal, "store returned a different size");
    }
    r.get_s = std::min(r.get_s, now_seconds() - t0);

    t0 = now_seconds();
    {
      FileSource source(plain_path);
      if (drain(source, buf) != artifact.size()) throw Error(ErrorCode::Internal, "plain file has a different size");
    }
    r.read_s = std::min(r.read_s, now_seconds() - t0);
  }
  return r;
}

double mb_per_s(uint64_t bytes, double seconds) { return double(bytes) / seconds / 1e6; }

// Runs per prefix length: --repeat, or by default 3 up to 512 tokens and 1
// above (short prefixes are cheap and noisy, long ones expensive and steady).
int repeats_for(int64_t repeat, int64_t tokens) { return int(repeat > 0 ? repeat : tokens <= 512 ? 3 : 1); }

// BOS, then deterministic pseudo-random ids (as `kvg bench`): a dense
// forward pass costs the same whatever the tokens say.
std::vector<int32_t> random_prompt(int64_t longest, int n_vocab) {
  std::vector<int32_t> prompt(size_t(longest + 1));
  prompt[0] = 1;
  for (int64_t i = 1; i <= longest; ++i)
    prompt[size_t(i)] = int32_t(uniform_for_position(7, i) * float(n_vocab - 3)) + 3;
  return prompt;
}

void print_header(const Model& model, double load_s, const EngineOptions& options, int64_t limit,
                  const FileStore& store, int64_t repeat) {
  std::printf("model        %s (%s, %llu parameters), loaded in %.3f s (fingerprint included)\n",
              model.path().c_str(), model.config().architecture.c_str(),
              (unsigned long long)model.parameter_count(), load_s);
  std::printf("engine       recipe %s, isa %s, %d thread(s), context %lld\n", options.recipe.name().c_str(), isa_name(options.isa),
              options.threads, (long long)limit);
  std::printf("store        %s (temporary)\n", store.dir().c_str());
  std::printf("timing       best of %s; sessions are created outside the timed regions\n\n",
              repeat > 0 ? std::to_string(repeat).c_str() : "3 up to 512 tokens, 1 above");
  std::printf("| prefix tokens | artifact bytes | bytes/token | capture ms | graft + 1 token ms | verify ms "
              "| hashed behind reads ms | read ms | reserve ms | copy+checks ms | decode ms | recompute ms | speed-up | exact |\n");
  std::printf("|--------------:|---------------:|------------:|-----------:|-------------------:|----------:"
              "|-----------------------:|--------:|-----------:|---------------:|----------:|-------------:|---------:|:-----:|\n");
}

void print_row(const Row& row) {
  std::printf("| %13lld | %14llu | %11.1f | %10.3f | %18.3f | %9.3f | %22.3f | %7.3f | %10.3f | %14.3f | %9.3f "
              "| %12.3f | %7.1fx | %5s |\n",
              (long long)row.tokens, (unsigned long long)row.bytes, double(row.bytes) / double(row.tokens),
              row.capture_s * 1e3, row.graft_s * 1e3, row.split.hash_s * 1e3, row.split.hashed_behind_s * 1e3,
              row.split.source_s * 1e3,
              row.split.reserve_s * 1e3, row.split.other_s() * 1e3, row.decode_s * 1e3, row.recompute_s * 1e3,
              row.recompute_s / row.graft_s, row.exact ? "yes" : "NO");
}

void print_json(const Model& model, const EngineOptions& options, const std::vector<Row>& rows, int64_t repeat,
                uint64_t bytes, const IoResult& io, bool all_exact) {
  std::printf("{\"kvg\":{\"version\":\"%s\",\"commit\":\"%s\"},\"model\":\"%s\",\"architecture\":\"%s\","
              "\"parameters\":%llu,\"recipe\":\"%s\",\"isa\":\"%s\",\"threads\":%d,\"rows\":[",
              version(), build_commit(), json_escape(model.path()).c_str(), json_escape(model.config().architecture).c_str(),
              (unsigned long long)model.parameter_count(), options.recipe.name().c_str(), isa_name(options.isa), options.threads);
  for (size_t i = 0; i < rows.size(); ++i)
    std::printf("%s{\"tokens\":%lld,\"best_of\":%d,\"bytes\":%llu,\"capture_ms\":%.4f,\"graft_ms\":%.4f,\"verify_ms\":%.4f,"
                "\"hashed_behind_ms\":%.4f,\"read_ms\":%.4f,\"reserve_ms\":%.4f,\"copy_ms\":%.4f,\"decode_ms\":%.4f,\"recompute_ms\":%.4f,"
                "\"exact\":%s}",
                i ? "," : "", (long long)rows[i].tokens, repeats_for(repeat, rows[i].tokens), (unsigned long long)rows[i].bytes, rows[i].capture_s * 1e3,
                rows[i].graft_s * 1e3, rows[i].split.hash_s * 1e3, rows[i].split.hashed_behind_s * 1e3,
                rows[i].split.source_s * 1e3,
                rows[i].split.reserve_s * 1e3, rows[i].split.other_s() * 1e3, rows[i].decode_s * 1e3,
                rows[i].recompute_s * 1e3, rows[i].exact ? "true" : "false");
  std::printf("],\"store_io\":{\"bytes\":%llu,\"store_put_mbps\":%.3f,\"file_write_mbps\":%.3f,"
              "\"store_get_mbps\":%.3f,\"file_read_mbps\":%.3f},\"all_exact\":%s}\n",
              (unsigned long long)bytes, mb_per_s(bytes, io.put_s), mb_per_s(bytes, io.write_s),
              mb_per_s(bytes, io.get_s), mb_per_s(bytes, io.read_s), all_exact ? "true" : "false");
}

void print_io_table(uint64_t bytes, int64_t longest, int io_repeat, const IoResult& io) {
  std::printf("\nstore vs plain file I/O, %llu bytes (the %lld-token artifact), same directory, best of %d; "
              "reads hit the page cache\n\n",
              (unsigned long long)bytes, (long long)longest, io_repeat);
  std::printf("| operation | FileStore                      | MB/s     | plain file        | MB/s     | store / plain |\n");
  std::printf("|-----------|--------------------------------|---------:|-------------------|---------:|--------------:|\n");
  std::printf("| write     | put from a file (hash, fsync)  | %8.1f | write + fsync     | %8.1f | %13.2f |\n",
              mb_per_s(bytes, io.put_s), mb_per_s(bytes, io.write_s), io.write_s / io.put_s);
  std::printf("| read      | get + read to end (verify)     | %8.1f | read to end       | %8.1f | %13.2f |\n",
              mb_per_s(bytes, io.get_s), mb_per_s(bytes, io.read_s), io.read_s / io.get_s);
}

// One prefix length's repeats: capture, graft and recompute, alternating
// within each repeat so that drift in the machine's load hits all alike.
class PrefixBench {
 public:
  PrefixBench(const std::shared_ptr<const Model>& model, const EngineOptions& options, FileStore& store,
              ProgressLine& progress, int64_t work_total)
      : model_(model), options_(options), store_(store), progress_(progress), work_total_(work_total),
        open_([&store](const Digest& id) { return store.get_unverified(id); }) {}

  // `whole` is the prefix and the token after it; leaves the last repeat's
  // artifact in `artifact` and its identity in `id`.
  Row measure(std::span<const int32_t> whole, int reps, MemorySink& artifact, Digest& id) {
    const int64_t n = int64_t(whole.size()) - 1;
    Row row;
    row.tokens = n;
    for (int rep = 0; rep < reps; ++rep) {
      if (rep > 0) remove_file(store_.path_of(id));  // each put does the full write
      id = capture_and_put(whole.first(size_t(n)), artifact, row);
      progress_.update(work_done_ += n, work_total_);
      std::vector<float> graft_logits, recompute_logits;
      graft_and_decode(whole, id, row, graft_logits);
      recompute(whole, row, recompute_logits);
      progress_.update(work_done_ += n + 1, work_total_);
      row.exact = row.exact && same_bytes(graft_logits, recompute_logits);
    }
    row.bytes = artifact.bytes().size();
    return row;
  }

 private:
  // Prefill, capture into `artifact` and put into the store: the capture time.
  Digest capture_and_put(std::span<const int32_t> prefix, MemorySink& artifact, Row& row) {
    const int64_t n = int64_t(prefix.size());
    Session session(model_, options_);
    artifact.bytes().clear();
    const double t0 = now_seconds();
    session.prefill(prefix, 0, LogitsFor::None, nullptr);
    artifact.bytes().reserve(capture_header(session, 0, n, std::nullopt).total_bytes());
    const Digest id = capture(session, 0, n, std::nullopt, artifact);
    MemorySource source(artifact.bytes());
    const Digest stored = store_.put(source);
    row.capture_s = std::min(row.capture_s, now_seconds() - t0);
    if (stored != id) throw Error(ErrorCode::Internal, "the store hashed the artifact differently");
    return id;
  }

  // Graft from the store, then the one token after the prefix; keeps the
  // split of the fastest repeat.
  void graft_and_decode(std::span<const int32_t> whole, const Digest& id, Row& row, std::vector<float>& logits) {
    Session session(model_, options_);
    GraftTimes split;
    const double t0 = now_seconds();
    graft(session, id, open_, whole, &split);
    const double t1 = now_seconds();
    session.forward(whole.subspan(whole.size() - 1), LogitsFor::Last, &logits);
    const double t2 = now_seconds();
    if (t2 - t0 < row.graft_s) {
      row.graft_s = t2 - t0;
      row.split = split;
      row.decode_s = t2 - t1;
    }
  }

  // The monolithic forward pass over the prefix and the following token.
  void recompute(std::span<const int32_t> whole, Row& row, std::vector<float>& logits) {
    Session session(model_, options_);
    const double t0 = now_seconds();
    session.forward(whole, LogitsFor::Last, &logits);
    row.recompute_s = std::min(row.recompute_s, now_seconds() - t0);
  }

  const std::shared_ptr<const Model>& model_;
  const EngineOptions& options_;
  FileStore& store_;
  ProgressLine& progress_;
  const int64_t work_total_;
  int64_t work_done_ = 0;
  const ArtifactOpener open_;
};

}  // namespace

int cmd_bench_graft(const Args& args) {
  const double load_t0 = now_seconds();
  auto model = load_model(args);
  const double load_s = now_seconds() - load_t0;
  const EngineOptions options = engine_options(args);
  const int n_vocab = model->config().n_vocab;
  if (n_vocab <= 3) throw Error(ErrorCode::InvalidArgument, "the model's vocabulary is too small for a random prompt");
  const int64_t limit = Session(model, options).max_context();
  if (limit < 2) throw Error(ErrorCode::InvalidArgument, "the context must hold at least a prefix and one token");
  const std::vector<int64_t> lengths =
      args.has("lengths") ? parse_lengths(args.get("lengths"), limit) : default_lengths(limit);
  const int64_t repeat = args.get_int("repeat", 0);  // 0: by prefix length
  if (args.has("repeat") && repeat < 1) throw Error(ErrorCode::InvalidArgument, "--repeat must be at least 1");
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  const std::vector<int32_t> prompt = random_prompt(longest, n_vocab);

  const TempDir dir(args.opt("store").value_or("/tmp"), "kvg-bench-graft");
  FileStore store(dir.path() + "/store");
  const bool json = args.has("json");  // one object at the end instead of tables
  if (!json) print_header(*model, load_s, options, limit, store, repeat);
  std::fflush(stdout);

  // Progress in tokens evaluated: each repeat prefills n (capture) and n + 1
  // (recompute); the graft's one token is not counted.
  int64_t work_total = 0;
  for (const int64_t n : lengths) work_total += repeats_for(repeat, n) * (2 * n + 1);
  ProgressLine progress("bench-graft", "tokens");
  progress.update(0, work_total);
  PrefixBench bench(model, options, store, progress, work_total);

  std::vector<Row> rows;
  std::vector<uint8_t> largest_artifact;
  Digest largest_id{};
  bool all_exact = true;
  for (const int64_t n : lengths) {
    Digest id{};
    MemorySink artifact;
    const Row row = bench.measure(std::span<const int32_t>(prompt.data(), size_t(n + 1)), repeats_for(repeat, n),
                                  artifact, id);
    all_exact = all_exact && row.exact;
    rows.push_back(row);
    progress.clear();  // the row goes to the same terminal
    if (!json) print_row(row);
    std::fflush(stdout);
    if (n == longest) {
      largest_artifact = std::move(artifact.bytes());
      largest_id = id;
    }
  }

  progress.clear();
  const int io_repeat = int(repeat > 0 ? repeat : 3);
  const IoResult io = measure_io(store, dir.path(), largest_artifact, largest_id, io_repeat);
  const uint64_t bytes = largest_artifact.size();
  if (json)
    print_json(*model, options, rows, repeat, bytes, io, all_exact);
  else
    print_io_table(bytes, longest, io_repeat, io);
  return all_exact ? 0 : 1;
}

}  // namespace kvg::cli
