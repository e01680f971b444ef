// The `kvg` subcommands: their names, flags and one-line help (the table in
// cli/commands.cpp), and the functions that run them on parsed flags.
#pragma once

#include <cstdio>
#include <string_view>
#include <vector>

#include "cli/args.hpp"

namespace kvg::cli {

struct Command {
  const char* name;
  const char* summary;  // one line, for `kvg help`
  int (*run)(const Args&);
  Flags flags;
  const char* positional = nullptr;  // a bare argument's name (verify FILE), if the command takes one
};

const std::vector<Command>& commands();
const Command* find_command(std::string_view name);
// `kvg help`: every command with its summary.
void print_command_list(std::FILE* out);
// `kvg help NAME`, `kvg NAME --help`: the command's usage and each flag on one line.
void print_command_help(std::FILE* out, const Command& command);

int cmd_info(const Args& args);
int cmd_tokenize(const Args& args);
int cmd_logits(const Args& args);
int cmd_generate(const Args& args);
// generate's work; `chat`: the prompt is a conversation (cli/chat_flags.hpp).
int run_generate(const Args& args, bool chat);
int cmd_chat(const Args& args);
int cmd_bench(const Args& args);
int cmd_bench_graft(const Args& args);
int cmd_bench_compose(const Args& args);
int cmd_bench_mapped(const Args& args);
int cmd_bench_store(const Args& args);
int cmd_synth(const Args& args);
int cmd_capture(const Args& args);
int cmd_verify(const Args& args);
int cmd_graft_check(const Args& args);
int cmd_synth_artifact(const Args& args);
// Recomputes one audit row's output (cli/cmd_reproduce.cpp).
int cmd_reproduce(const Args& args);
// Measures the flywheel: cold vs recurring vs transfer (cli/cmd_eval.cpp).
int cmd_eval(const Args& args);
// Shows or sets the knowledge template a model carries (cli/cmd_template.cpp).
int cmd_template(const Args& args);

}  // namespace kvg::cli
