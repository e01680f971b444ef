// `kvg chat`: a conversation (cli/chat_flags.hpp) laid out in the model's
// chat format, answered as `kvg generate --chat` answers, stopping at the
// end of the assistant's turn.
#include "cli/commands.hpp"

namespace kvg::cli {

int cmd_chat(const Args& args) { return run_generate(args, true); }

}  // namespace kvg::cli
