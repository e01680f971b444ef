// kvg bench-mapped: a long context's KV read in place from mapped artifact
// files (engine/mapped_kv.hpp) against the same KV grafted into the
// resident cache (docs/long-context.md). One prefill of the longest context
// is stored as a chain whose links end at each --lengths; then, for each
// length, the chain is opened both ways and --decode tokens are decoded
// after it. Every row checks the decoded logits are the same bytes both
// ways. The page cache is warm (the files were just written and read).
// With --max-kv-memory below a context's KV, the resident row is refused
// (the session's own error) and the mapped one runs.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "cli/args.hpp"
#include "cli/bench/bench_support.hpp"
#include "cli/clock.hpp"
#include "cli/commands.hpp"
#include "cli/engine_flags.hpp"
#include "common/error.hpp"
#include "engine/graft.hpp"
#include "engine/mapped_kv.hpp"
#include "engine/sampler.hpp"
#include "storage/file_store.hpp"

namespace kvg::cli {

namespace {

// kB fields of /proc/self/status: anonymous memory (the resident cache) and
// file pages mapped and touched (the mapped artifacts, the model).
struct Rss {
  int64_t anon_kb = 0, file_kb = 0;
};

Rss read_rss() {
  std::ifstream status("/proc/self/status");
  Rss r;
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("RssAnon:", 0) == 0) r.anon_kb = std::stoll(line.substr(8));
    if (line.rfind("RssFile:", 0) == 0) r.file_kb = std::stoll(line.substr(8));
  }
  return r;
}

struct Side {
  bool ran = false;
  std::string refused;    // the error that refused it
  double open_s = 0;      // graft (copy) or map, verification included
  double decode_s = 0;
  int64_t kv_held = 0;    // bytes the session's resident cache holds
  Rss grew;               // RSS growth while the session lived
  std::vector<float> logits;  // of every decoded token
};

// Opens the chain one way, then decodes `decode` tokens of `prompt` after it.
template <class Open>
Side run_side(const std::shared_ptr<const Model>& model, const EngineOptions& options,
              const std::vector<int32_t>& prompt, int64_t length, int64_t decode, Open open) {
  Side side;
  const Rss before = read_rss();
  try {
    Session session(model, options);
    double t = now_seconds();
    open(session);
    side.open_s = now_seconds() - t;
    std::vector<float> last;
    t = now_seconds();
    for (int64_t p = length; p < length + decode; ++p) {
      session.forward(std::span<const int32_t>(prompt.data() + p, 1), LogitsFor::Last, &last);
      side.logits.insert(side.logits.end(), last.begin(), last.end());
    }
    side.decode_s = now_seconds() - t;
    side.kv_held = session.kv_cache().held_bytes();
    const Rss after = read_rss();
    side.grew = {after.anon_kb - before.anon_kb, after.file_kb - before.file_kb};
    side.ran = true;
  } catch (const Error& e) {
    if (e.code() != ErrorCode::OutOfRange) throw;
    side.refused = e.what();
  }
  return side;
}

double mib(int64_t bytes) { return double(bytes) / double(1 << 20); }

}  // namespace

int cmd_bench_mapped(const Args& args) {
  auto model = load_model(args);
  const EngineOptions options = engine_options(args);
  EngineOptions unbounded = options;  // for the prefill that stores the chain
  unbounded.max_kv_bytes = 0;
  const int n_vocab = model->config().n_vocab;
  if (n_vocab <= 3) throw Error(ErrorCode::InvalidArgument, "the model's vocabulary is too small for a random prompt");
  const int64_t limit = Session(model, unbounded).max_context();
  const int64_t decode = args.get_int("decode", 16);
  if (decode < 1 || decode >= limit) throw Error(ErrorCode::InvalidArgument, "--decode must be in 1..context-1");
  std::vector<int64_t> lengths = parse_lengths(args.opt("lengths").value_or("1024,4096,8000"), limit);
  std::sort(lengths.begin(), lengths.end());
  lengths.erase(std::unique(lengths.begin(), lengths.end()), lengths.end());
  if (lengths.back() + decode > limit)
    throw Error(ErrorCode::InvalidArgument, "a context of " + std::to_string(lengths.back()) + " and " +
                                                std::to_string(decode) + " decoded tokens does not fit the " +
                                                std::to_string(limit) + " positions");

  // BOS, then deterministic pseudo-random ids (as `kvg bench`).
  std::vector<int32_t> prompt(size_t(lengths.back() + decode));
  prompt[0] = 1;
  for (size_t i = 1; i < prompt.size(); ++i)
    prompt[i] = int32_t(uniform_for_position(7, int64_t(i)) * float(n_vocab - 3)) + 3;

  const TempDir dir(args.opt("store").value_or("/tmp"), "kvg-bench-mapped");
  FileStore store(dir.path() + "/store");
  const ArtifactOpener copy_from = [&store](const Digest& id) { return store.get_unverified(id); };
  const ArtifactPathOf map_from = [&store](const Digest& id) { return store.path_of(id); };

  // One prefill, one chain: link i holds positions [lengths[i-1], lengths[i]).
  std::fprintf(stderr, "bench-mapped: prefilling %lld tokens...\n", (long long)lengths.back());
  double t = now_seconds();
  std::vector<Digest> leaves;
  {
    Session writer(model, unbounded);
    for (int64_t length : lengths) {
      const int64_t from = writer.n_past();
      writer.prefill(std::span<const int32_t>(prompt.data() + from, size_t(length - from)), 512, LogitsFor::None,
                     nullptr);
      FileSink sink(dir.path() + "/link.tmp");
      const Digest id =
          capture(writer, from, length, leaves.empty() ? std::nullopt : std::optional<Digest>(leaves.back()), sink);
      sink.close();
      FileSource written(dir.path() + "/link.tmp");
      if (store.put(written) != id) throw Error(ErrorCode::Internal, "the store hashed a link differently");
      leaves.push_back(id);
    }
  }
  const double prefill_s = now_seconds() - t;

  const int64_t per_position = Session(model, unbounded).kv_cache().bytes_for(1);
  std::printf("context beyond memory: resident graft vs mapped KV (%s, %d threads, %s, %lld decoded tokens, "
              "--max-kv-memory %s; prefill of %lld tokens %.1f s)\n",
              model->config().name.c_str(), options.threads, isa_name(options.isa), (long long)decode,
              options.max_kv_bytes > 0 ? (std::to_string(options.max_kv_bytes) + " B").c_str() : "unbounded",
              (long long)lengths.back(), prefill_s);
  std::printf("%7s %6s %9s | %9s %9s %9s %9s | %9s %9s %9s %9s %9s | %6s %5s\n", "context", "links", "KV MiB",
              "res open", "res tok/s", "res KV", "res anon", "map open", "map tok/s", "map KV", "map anon", "map file",
              "open", "exact");
  std::printf("%7s %6s %9s | %9s %9s %9s %9s | %9s %9s %9s %9s %9s | %6s %5s\n", "", "", "", "ms", "", "MiB", "MiB",
              "ms", "", "MiB", "MiB", "MiB", "ratio", "");
  bool all_exact = true;
  for (size_t i = 0; i < lengths.size(); ++i) {
    const int64_t length = lengths[i];
    const Side resident = run_side(model, options, prompt, length, decode,
                                   [&](Session& s) { graft(s, leaves[i], copy_from, prompt); });
    const Side mapped = run_side(model, options, prompt, length, decode,
                                 [&](Session& s) { graft_mapped(s, leaves[i], map_from, prompt); });
    if (!mapped.ran) throw Error(ErrorCode::OutOfRange, "mapped KV refused: " + mapped.refused);
    // Without a resident row to compare, the mapped logits are checked
    // against an unbounded resident session.
    const Side reference = resident.ran ? resident
                                        : run_side(model, unbounded, prompt, length, decode,
                                                   [&](Session& s) { graft(s, leaves[i], copy_from, prompt); });
    const bool exact = reference.logits.size() == mapped.logits.size() &&
                       std::memcmp(reference.logits.data(), mapped.logits.data(),
                                   mapped.logits.size() * sizeof(float)) == 0;
    all_exact = all_exact && exact;
    if (resident.ran)
      std::printf("%7lld %6zu %9.1f | %9.2f %9.1f %9.1f %9.1f | %9.2f %9.1f %9.1f %9.1f %9.1f | %5.1fx %5s\n",
                  (long long)length, i + 1, mib(length * per_position), 1e3 * resident.open_s,
                  double(decode) / resident.decode_s, mib(resident.kv_held), double(resident.grew.anon_kb) / 1024,
                  1e3 * mapped.open_s, double(decode) / mapped.decode_s, mib(mapped.kv_held),
                  double(mapped.grew.anon_kb) / 1024, double(mapped.grew.file_kb) / 1024,
                  resident.open_s / mapped.open_s, exact ? "yes" : "NO");
    else
      std::printf("%7lld %6zu %9.1f | %9s %9s %9s %9s | %9.2f %9.1f %9.1f %9.1f %9.1f | %6s %5s\n", (long long)length,
                  i + 1, mib(length * per_position), "refused", "", "", "", 1e3 * mapped.open_s,
                  double(decode) / mapped.decode_s, mib(mapped.kv_held), double(mapped.grew.anon_kb) / 1024,
                  double(mapped.grew.file_kb) / 1024, "", exact ? "yes" : "NO");
    if (!resident.refused.empty()) std::printf("        resident refused: %s\n", resident.refused.c_str());
  }
  std::printf("(open: graft = read, hash and copy every link into the cache; mapped = map and hash every link.\n"
              " KV: bytes the session's resident cache holds; anon, file: growth of the process's anonymous and\n"
              " file-backed RSS while the session lived (file: the mapped artifacts' page-cache pages, shared and\n"
              " evictable; anon is coarse: the allocator may reuse memory freed before). exact: the decoded\n"
              " tokens' logits are the same bytes both ways)\n");
  if (!all_exact) throw Error(ErrorCode::Internal, "mapped KV gave other logits than the resident cache");
  return 0;
}

}  // namespace kvg::cli
