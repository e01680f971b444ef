// kvg: the command-line face of the engine. `kvg help` lists the commands.
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "cli/commands.hpp"
#include "common/error.hpp"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* usage;
};

const Command kCommands[] = {
    {"info", kvg::cli::cmd_info, "--model M [--json]"},
    {"tokenize", kvg::cli::cmd_tokenize, "--model M --text T [--bos]"},
    {"logits", kvg::cli::cmd_logits,
     "--model M --tokens 1,2,3 --out FILE [--chunk K] [--threads N] [--isa I] [--artifact A [--store DIR]]"},
    {"generate", kvg::cli::cmd_generate,
     "--model M (--text T | --tokens ...) [-n N] [--seed S --temperature X --top-k K --top-p P] [--json] "
     "[--artifact A [--store DIR]]"},
    {"capture", kvg::cli::cmd_capture,
     "--model M (--text T | --tokens ...) (--out FILE | --store DIR) [--parent HASH]"},
    {"verify", kvg::cli::cmd_verify, "FILE"},
    {"graft-check", kvg::cli::cmd_graft_check,
     "--model M --artifact A (--tokens ... | --text T) [--samples N] [--store DIR]"},
    {"bench", kvg::cli::cmd_bench, "--model M [--prompt-tokens N] [--gen-tokens N] [--threads T]"},
    {"bench-graft", kvg::cli::cmd_bench_graft,
     "--model M [--lengths 64,128,...] [--store DIR] [--threads T] [--repeat R]"},
    {"synth", kvg::cli::cmd_synth,
     "--out F.gguf --n-embd .. --n-layer .. --n-head .. --n-head-kv .. --n-ff .. --vocab .. --type f32|f16|q8_0 --seed S"},
    {"synth-artifact", kvg::cli::cmd_synth_artifact, "--bytes N --out FILE [--seed S]  (benchmark helper: random KV)"},
};

void usage(std::FILE* out) {
  std::fprintf(out, "usage: kvg <command> [flags]\n\n");
  for (const Command& c : kCommands) std::fprintf(out, "  kvg %-9s %s\n", c.name, c.usage);
  std::fprintf(out, "\nEngine flags for commands that run the model: --threads N, --isa scalar|avx2|avx512|auto, "
                    "--max-context N, --device cpu|cuda|auto\n");
}

// Exit statuses: 0 success, 1 a check failed (e.g. graft not exact), 2 bad
// usage or input, 3 environment (I/O, unsupported), 4 internal error.
int exit_status(kvg::ErrorCode code) {
  switch (code) {
    case kvg::ErrorCode::Io:
    case kvg::ErrorCode::Unsupported: return 3;
    case kvg::ErrorCode::Internal: return 4;
    default: return 2;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "help") || !std::strcmp(argv[1], "--help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (const Command& c : kCommands) {
    if (std::strcmp(argv[1], c.name) != 0) continue;
    try {
      return c.run(argc, argv);
    } catch (const kvg::Error& e) {
      std::fprintf(stderr, "kvg %s: %s: %s\n", c.name, kvg::error_code_name(e.code()), e.what());
      return exit_status(e.code());
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "kvg %s: out of memory\n", c.name);
      return 3;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kvg %s: %s\n", c.name, e.what());
      return 4;
    }
  }
  std::fprintf(stderr, "kvg: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
