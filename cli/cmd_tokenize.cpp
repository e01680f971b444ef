#include <cstdio>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/engine_flags.hpp"

namespace kvg::cli {

int cmd_tokenize(const Args& args) {
  auto model = load_model(args);
  const Tokenizer& tok = model->tokenizer();
  const auto ids = args.has("bos") ? tok.encode_with_bos(args.get("text")) : tok.encode(args.get("text"));
  std::printf("%s\n", join_tokens(ids).c_str());
  return 0;
}

}  // namespace kvg::cli
