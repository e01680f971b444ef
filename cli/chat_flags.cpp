#include "cli/chat_flags.hpp"

#include <fstream>
#include <iterator>
#include <sstream>

#include "common/error.hpp"
#include "engine/chat_messages.hpp"
#include "engine/prompt.hpp"

namespace kvg::cli {

namespace {

std::string read_messages_file(const std::string& path, const Model& model) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::Io, "cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  const std::string json = text.str();
  // JSON escapes spell a byte in at most 6 (\u0000): a longer file cannot fit.
  check_prompt_bytes(model, json.size() / 6, "--messages-file");
  return json;
}

}  // namespace

Flags chat_flags() {
  return {{"messages", "JSON", "the conversation: [{\"role\":\"system|user|assistant\",\"content\":\"...\"}, ...]"},
          {"messages-file", "FILE", "the conversation's JSON from a file"},
          {"system", "S", "with --user: a system message first"},
          {"user", "U", "a one-turn conversation: this user message", "-p"},
          {"format", "F", "auto|plain|chatml|llama3|gemma|phi3|mistral: the layout (default auto: the model's "
                          "tokenizer.chat_template; plain where it has none)"}};
}

ChatPrompt chat_prompt_from_flags(const Args& args, const Model& model) {
  const int given = int(args.has("messages")) + int(args.has("messages-file")) +
                    int(args.has("user") || args.has("text"));
  if (given != 1)
    throw Error(ErrorCode::InvalidArgument, "give exactly one of --messages, --messages-file and --user (or --text)");
  if (args.has("system") && !(args.has("user") || args.has("text")))
    throw Error(ErrorCode::InvalidArgument, "--system goes with --user; put a system message into --messages instead");
  std::vector<ChatMessage> messages;
  if (args.has("messages")) {
    messages = parse_chat_messages(args.get("messages"));
  } else if (args.has("messages-file")) {
    messages = parse_chat_messages(read_messages_file(args.get("messages-file"), model));
  } else {
    if (args.has("system")) messages.push_back({"system", args.get("system")});
    messages.push_back({"user", args.has("user") ? args.get("user") : args.get("text")});
  }
  const ChatStyle style = model_chat_style(model.tokenizer(), args.opt("format").value_or("auto"));
  return chat_prompt(model, style, messages);
}

}  // namespace kvg::cli
