// The messages of a chat as JSON (engine/chat_messages.hpp): an array of
// objects with exactly a string role and a string content, read with
// common/json_reader.hpp.
#include "engine/chat_messages.hpp"

#include <cstdint>
#include <string>

#include "common/error.hpp"
#include "common/json_reader.hpp"

namespace kvg {

std::vector<ChatMessage> parse_chat_messages(std::string_view json) {
  const std::string what = "chat messages JSON";
  const nlohmann::json doc = read_json(json, what);
  if (!doc.is_array())
    throw Error(ErrorCode::InvalidArgument, what + ": expected an array of messages, [{\"role\": ..., \"content\": ...}, ...]");
  if (doc.size() > kMaxChatMessages)
    throw Error(ErrorCode::OutOfRange, "a chat may have at most " + std::to_string(kMaxChatMessages) + " messages");
  std::vector<ChatMessage> messages;
  for (const nlohmann::json& item : doc) {
    const std::string n = what + ": message " + std::to_string(messages.size() + 1);
    if (!item.is_object()) throw Error(ErrorCode::InvalidArgument, n + " is not an object");
    for (const auto& [key, value] : item.items()) {
      if (key != "role" && key != "content")
        throw Error(ErrorCode::InvalidArgument,
                    n + ": unknown member \"" + key + "\" (a message has exactly role and content)");
      if (!value.is_string()) throw Error(ErrorCode::InvalidArgument, n + ": " + key + " must be a string");
    }
    if (!item.contains("role") || !item.contains("content"))
      throw Error(ErrorCode::InvalidArgument, n + ": a message needs both \"role\" and \"content\"");
    messages.push_back(ChatMessage{item["role"].get<std::string>(), item["content"].get<std::string>()});
  }
  return messages;
}

}  // namespace kvg
