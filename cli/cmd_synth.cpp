#include <cstdio>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/progress_line.hpp"
#include "tools/synth_model.hpp"

namespace kvg::cli {

int cmd_synth(const Args& args) {
  SynthOptions o;
  o.n_embd = int(args.get_int("n-embd", 64));
  o.n_layer = int(args.get_int("n-layer", 2));
  o.n_head = int(args.get_int("n-head", 4));
  o.n_head_kv = int(args.get_int("n-head-kv", o.n_head));
  o.n_ff = int(args.get_int("n-ff", o.n_embd * 4));
  o.n_vocab = int(args.get_int("vocab", 512));
  o.n_ctx = int(args.get_int("n-ctx", 2048));
  o.type = args.opt("type").value_or("f32");
  o.seed = uint64_t(args.get_int("seed", 0));
  o.rope_base = float(args.get_double("rope-base", 10000.0));
  o.architecture = args.opt("arch").value_or("llama");
  o.chat_template = args.opt("chat-template").value_or("");
  o.llama3_rope = args.has("llama3-rope");
  o.rope_scale = float(args.get_double("rope-scale", 0.0));
  o.sliding_window = int(args.get_int("sliding-window", 0));
  o.attn_softcap = float(args.get_double("attn-softcap", 0.0));
  o.final_softcap = float(args.get_double("final-softcap", 0.0));
  const std::string out = args.get("out");
  {
    ProgressLine progress("synth", "MB", 1e6);
    write_synth_model(o, out, progress.reporter());
  }
  std::printf("%s\n", out.c_str());
  return 0;
}

}  // namespace kvg::cli
