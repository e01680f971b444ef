// A conversation as JSON, the one shape `kvg chat --messages` and the SQL
// function kvg_chat(messages jsonb, ...) take:
//   [{"role": "system", "content": "..."}, {"role": "user", "content": "..."}]
// An array of objects, each with exactly the string members "role" and
// "content". Anything else (another member, a non-string content, trailing
// text) is refused by name: a member kvg would ignore (tool_calls, a list of
// content parts) would silently change what the model is asked.
#pragma once

#include <string_view>
#include <vector>

#include "engine/chat_template.hpp"

namespace kvg {

// Throws InvalidArgument naming what is wrong and where (byte offset).
std::vector<ChatMessage> parse_chat_messages(std::string_view json);

}  // namespace kvg
