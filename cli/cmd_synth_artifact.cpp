// kvg synth-artifact: a benchmark helper (issue #4); cli/synth_artifact.hpp
// says what it writes. The artifact's SHA-256 is the last line printed.
#include <cstdio>
#include <string>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/synth_artifact.hpp"
#include "common/error.hpp"

namespace kvg::cli {

int cmd_synth_artifact(const Args& args) {
  const int64_t target = args.get_int("bytes", -1);
  if (target <= 0) throw Error(ErrorCode::InvalidArgument, "--bytes N (a positive byte count) is required");
  const std::string out = args.get("out");
  const uint64_t seed = uint64_t(args.get_int("seed", 0));
  FileSink sink(out);
  const SynthArtifact a = write_synth_artifact(uint64_t(target), seed, sink);
  sink.close(true);

  const double off_by = 100.0 * (double(a.bytes) - double(target)) / double(target);
  std::fprintf(stderr,
               "wrote %llu bytes (asked %lld, %+.3f%%) to %s: n_layer %u, n_head_kv %u, head_dim %u, n_tokens %llu, "
               "seed %llu, random KV (benchmark data, not for grafting)\n",
               (unsigned long long)a.bytes, (long long)target, off_by, out.c_str(), a.n_layer, a.n_head_kv,
               a.head_dim, (unsigned long long)a.n_tokens, (unsigned long long)seed);
  std::printf("%s\n", to_hex(a.id).c_str());
  return 0;
}

}  // namespace kvg::cli
