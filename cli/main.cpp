// kvg: the command-line face of the engine. `kvg help` lists the commands.
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/suggest.hpp"
#include "cli/version.hpp"
#include "common/error.hpp"

namespace {

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

int unknown_command(const char* name) {
  std::vector<std::string> names;
  for (const kvg::cli::Command& c : kvg::cli::commands()) names.push_back(c.name);
  // `kvg --threads 2 bench`, `kvg -m M`: a flag where the command goes.
  if (name[0] == '-') names = {"--help", "--version"};
  const std::string near = kvg::cli::nearest_spelling(name, names);
  if (near.empty()) std::fprintf(stderr, "kvg: unknown command '%s'\n\n", name);
  else std::fprintf(stderr, "kvg: unknown command '%s'; did you mean '%s'?\n\n", name, near.c_str());
  kvg::cli::print_command_list(stderr);
  return 2;
}

bool is_help(const char* arg) { return !std::strcmp(arg, "help") || !std::strcmp(arg, "--help") || !std::strcmp(arg, "-h"); }

}  // namespace

int main(int argc, char** argv) {
  using namespace kvg::cli;
  if (argc < 2) {
    print_command_list(stderr);
    return 2;
  }
  if (!std::strcmp(argv[1], "--version")) {
    print_version(stdout);
    return 0;
  }
  if (is_help(argv[1])) {
    if (argc < 3) {
      print_command_list(stdout);
      return 0;
    }
    const Command* c = find_command(argv[2]);
    if (!c) return unknown_command(argv[2]);
    print_command_help(stdout, *c);
    return 0;
  }
  const Command* c = find_command(argv[1]);
  if (!c) return unknown_command(argv[1]);
  try {
    const Args args(argc, argv, 2, c->flags, c->positional ? 1 : 0);
    if (args.help_requested()) {
      print_command_help(stdout, *c);
      return 0;
    }
    return c->run(args);
  } catch (const kvg::Error& e) {
    std::fprintf(stderr, "kvg %s: %s: %s\n", c->name, kvg::error_code_name(e.code()), e.what());
    return exit_status(e.code());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "kvg %s: out of memory\n", c->name);
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvg %s: %s\n", c->name, e.what());
    return 4;
  }
}
