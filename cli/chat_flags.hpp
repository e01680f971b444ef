// The conversation of `kvg chat` and `kvg generate --chat`, from its flags:
// --messages JSON or --messages-file FILE (engine/chat_messages.hpp), or one
// turn from --system and --user (generate: --text); --format picks the
// layout (auto: the model's chat template).
#pragma once

#include "cli/args.hpp"
#include "engine/chat_prompt.hpp"

namespace kvg::cli {

// The flags above, for the command table.
Flags chat_flags();

ChatPrompt chat_prompt_from_flags(const Args& args, const Model& model);

}  // namespace kvg::cli
