// Chat formats: recognising a GGUF's tokenizer.chat_template and laying a
// conversation out as that format's text and markers (docs/chat.md).
//
// A chat template is a Jinja program. kvg does not run it: Debian packages
// no Jinja engine for C++ (`apt-cache search jinja` finds Python's Jinja2
// only; minja and Jinja2Cpp are not packaged), and an interpreter with loops
// inside the database server would be one more thing to bound and fuzz. The
// instruct models people run use a handful of layouts, and each template
// names its own by its markers (<|im_start|>, <|start_header_id|>,
// <start_of_turn>, <|user|>, [INST]).
// kvg recognises those and lays them out in C++, checked token by token
// against the layouts the real templates produce (tests/engine/test_chat_template.cpp
// with the templates under tests/data/chat-templates/). What a template does
// beyond its format's layout (Llama 3.1+'s date preamble, tool calls) is not
// reproduced.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvg {

enum class ChatFormat { Plain, ChatML, Llama3, Gemma, Phi3, Mistral };

// Where a format puts a system message.
enum class SystemTurn {
  Own,            // a turn of its own, first
  IntoFirstUser,  // Gemma 3: its text, then "\n\n", opens the first user turn
  Refused,        // no place for it (Gemma 1/2, Mistral v0.1/v0.2, Phi-3-mini's first template)
};

struct ChatStyle {
  ChatFormat format = ChatFormat::Plain;
  SystemTurn system = SystemTurn::Own;
  // A system message the template writes when the conversation has none
  // (Qwen2.5: "You are Qwen, ...", SmolLM2: "You are a helpful AI
  // assistant named SmolLM, ..."): ChatML only; empty when there is none.
  std::string default_system;
};

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// One piece of a laid-out conversation. A marker ("<|im_start|>") becomes
// its special token when the vocabulary has one, and is text otherwise
// (Mistral v0.1's "[INST]"); text is always text, never a special token.
struct ChatSegment {
  std::string text;
  bool marker = false;
  bool operator==(const ChatSegment&) const = default;
};

// "plain", "chatml", "llama3", "gemma", "phi3", "mistral".
const char* chat_format_name(ChatFormat format);
// The format of a name chat_format_name gives; InvalidArgument for others.
ChatFormat parse_chat_format(std::string_view name);

// The format of a tokenizer.chat_template, by its markers; nullopt when it
// is none of them.
std::optional<ChatStyle> recognise_chat_template(std::string_view chat_template);

// The style to lay out with. `requested`: "auto" (the template's format; a
// model without a template gets Plain; an unrecognised template is refused,
// Unsupported, naming the formats and the way out), "plain", or a format
// name (that format's layout, whatever the template says).
ChatStyle choose_chat_style(std::string_view chat_template, std::string_view requested);

// Every marker the format's layout may write, longest first.
std::vector<std::string> chat_markers(ChatFormat format);
// The marker that ends a turn ("<|im_end|>", "<|eot_id|>", "<end_of_turn>",
// "<|end|>", "</s>"); empty for Plain.
std::string_view end_of_turn_marker(ChatFormat format);

// Most messages one conversation may have (bounds the work before it begins).
inline constexpr size_t kMaxChatMessages = 4096;

// The conversation laid out as the model expects it, ending with the cue for
// the assistant's turn. At least one message; roles are system (first only),
// user and assistant; the last message is the user's. Formats that require
// it (Gemma, Mistral) also need user and assistant to alternate. Errors:
// InvalidArgument for an unusable conversation, Unsupported for a system
// message the format has no place for; each names the message.
std::vector<ChatSegment> lay_out_chat(const ChatStyle& style, const std::vector<ChatMessage>& messages);

// The segments' text, concatenated: what the template would print.
std::string chat_text(std::span<const ChatSegment> segments);

}  // namespace kvg
