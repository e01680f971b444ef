// The `kvg` subcommands; each parses its own flags from argv[2..].
#pragma once

namespace kvg::cli {

int cmd_info(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_logits(int argc, char** argv);
int cmd_generate(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_bench_graft(int argc, char** argv);
int cmd_synth(int argc, char** argv);
int cmd_capture(int argc, char** argv);
int cmd_verify(int argc, char** argv);
int cmd_graft_check(int argc, char** argv);
int cmd_synth_artifact(int argc, char** argv);

}  // namespace kvg::cli
