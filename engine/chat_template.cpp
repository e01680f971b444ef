#include "engine/chat_template.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace kvg {

namespace {

struct FormatInfo {
  ChatFormat format;
  const char* name;
  std::vector<std::string> markers;
  const char* end_of_turn;
};

const std::vector<FormatInfo>& formats() {
  static const std::vector<FormatInfo> table = {
      {ChatFormat::Plain, "plain", {}, ""},
      {ChatFormat::ChatML, "chatml", {"<|im_start|>", "<|im_end|>"}, "<|im_end|>"},
      {ChatFormat::Llama3, "llama3", {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}, "<|eot_id|>"},
      {ChatFormat::Gemma, "gemma", {"<start_of_turn>", "<end_of_turn>"}, "<end_of_turn>"},
      {ChatFormat::Phi3, "phi3", {"<|assistant|>", "<|system|>", "<|user|>", "<|end|>"}, "<|end|>"},
      {ChatFormat::Mistral, "mistral", {"[/INST]", "[INST]", "</s>"}, "</s>"},
  };
  return table;
}

const FormatInfo& info(ChatFormat format) {
  for (const FormatInfo& f : formats())
    if (f.format == format) return f;
  throw Error(ErrorCode::Internal, "chat: a format without a table row");
}

bool contains(std::string_view text, std::string_view what) { return text.find(what) != std::string_view::npos; }

// Jinja's `| trim` strips whitespace at both ends (ASCII whitespace here).
std::string trim(std::string_view s) {
  constexpr std::string_view ws = " \t\n\r\f\v";
  const size_t first = s.find_first_not_of(ws);
  if (first == std::string_view::npos) return "";
  return std::string(s.substr(first, s.find_last_not_of(ws) - first + 1));
}

// A ChatML template that writes a system turn of literal text when the
// conversation has none ('<|im_start|>system\nYou are ...<|im_end|>\n'):
// that text, with the Jinja string escape \n read as a newline. A system
// turn built from an expression ('... + messages[0]['content'] + ...') has
// quotes or braces between the markers and is no default.
std::string chatml_default_system(std::string_view tmpl) {
  constexpr std::string_view open = "<|im_start|>system";
  constexpr std::string_view close = "<|im_end|>";
  for (size_t at = tmpl.find(open); at != std::string_view::npos; at = tmpl.find(open, at + 1)) {
    size_t body = at + open.size();
    if (tmpl.substr(body, 2) == "\\n") body += 2;
    else if (tmpl.substr(body, 1) == "\n") body += 1;
    else continue;
    const size_t end = tmpl.find(close, body);
    if (end == std::string_view::npos) break;
    const std::string_view literal = tmpl.substr(body, end - body);
    if (literal.empty() || literal.find_first_of("'\"{}+") != std::string_view::npos) continue;
    std::string text;
    for (size_t i = 0; i < literal.size(); ++i) {
      if (literal[i] == '\\' && i + 1 < literal.size() && literal[i + 1] == 'n') {
        text += '\n';
        ++i;
      } else {
        text += literal[i];
      }
    }
    return text;
  }
  return "";
}

// Appends, merging adjacent text so that equal layouts compare equal.
class Builder {
 public:
  void text(std::string_view t) {
    if (t.empty()) return;
    if (!out_.empty() && !out_.back().marker) out_.back().text += t;
    else out_.push_back({std::string(t), false});
  }
  void marker(std::string_view m) { out_.push_back({std::string(m), true}); }
  std::vector<ChatSegment> take() { return std::move(out_); }

 private:
  std::vector<ChatSegment> out_;
};

std::string where(size_t index, const ChatMessage& m) {
  return "chat message " + std::to_string(index + 1) + " (" + m.role + ")";
}

void check_conversation(const ChatStyle& style, const std::vector<ChatMessage>& messages) {
  if (messages.empty()) throw Error(ErrorCode::InvalidArgument, "a chat needs at least one message");
  if (messages.size() > kMaxChatMessages)
    throw Error(ErrorCode::OutOfRange, "a chat of " + std::to_string(messages.size()) +
                                           " messages exceeds the limit of " + std::to_string(kMaxChatMessages));
  const char* name = chat_format_name(style.format);
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      throw Error(ErrorCode::InvalidArgument, where(i, m) + ": the role must be system, user or assistant");
    if (m.role == "system" && i != 0)
      throw Error(ErrorCode::InvalidArgument, where(i, m) + ": a system message may only come first");
    if (m.role == "system" && style.system == SystemTurn::Refused)
      throw Error(ErrorCode::Unsupported, where(i, m) + ": the model's chat format (" + std::string(name) +
                                              ") has no place for a system message");
  }
  if (messages.back().role != "user")
    throw Error(ErrorCode::InvalidArgument, where(messages.size() - 1, messages.back()) +
                                                ": the last message must be the user's (the assistant answers it)");
  if (style.format != ChatFormat::Gemma && style.format != ChatFormat::Mistral) return;
  const size_t first = messages.front().role == "system" ? 1 : 0;
  for (size_t i = first; i < messages.size(); ++i)
    if ((messages[i].role == "user") != ((i - first) % 2 == 0))
      throw Error(ErrorCode::InvalidArgument,
                  where(i, messages[i]) + ": the model's chat format (" + std::string(name) +
                      ") needs user and assistant messages to alternate, beginning with the user's");
}

void lay_out_message(const ChatStyle& style, const ChatMessage& m, std::string_view prefix, Builder& b) {
  switch (style.format) {
    case ChatFormat::Plain:
      if (m.role == "system") b.text(m.content + "\n\n");
      else b.text((m.role == "user" ? "User: " : "Assistant: ") + m.content + "\n");
      return;
    case ChatFormat::ChatML:
      b.marker("<|im_start|>");
      b.text(m.role + "\n" + m.content);
      b.marker("<|im_end|>");
      b.text("\n");
      return;
    case ChatFormat::Llama3:
      b.marker("<|start_header_id|>");
      b.text(m.role);
      b.marker("<|end_header_id|>");
      b.text("\n\n" + trim(m.content));
      b.marker("<|eot_id|>");
      return;
    case ChatFormat::Gemma:
      b.marker("<start_of_turn>");
      b.text((m.role == "assistant" ? std::string("model") : m.role) + "\n" + std::string(prefix) + trim(m.content));
      b.marker("<end_of_turn>");
      b.text("\n");
      return;
    case ChatFormat::Phi3:
      b.marker("<|" + m.role + "|>");
      b.text("\n" + m.content);
      b.marker("<|end|>");
      b.text("\n");
      return;
    case ChatFormat::Mistral:
      if (m.role == "user") {
        b.marker("[INST]");
        b.text(" " + m.content + " ");
        b.marker("[/INST]");
      } else {
        b.text(m.content);
        b.marker("</s>");
      }
      return;
  }
}

void lay_out_cue(ChatFormat format, Builder& b) {
  switch (format) {
    case ChatFormat::Plain: b.text("Assistant:"); return;
    case ChatFormat::ChatML: b.marker("<|im_start|>"); b.text("assistant\n"); return;
    case ChatFormat::Llama3:
      b.marker("<|start_header_id|>");
      b.text("assistant");
      b.marker("<|end_header_id|>");
      b.text("\n\n");
      return;
    case ChatFormat::Gemma: b.marker("<start_of_turn>"); b.text("model\n"); return;
    case ChatFormat::Phi3: b.marker("<|assistant|>"); b.text("\n"); return;
    case ChatFormat::Mistral: return;  // the turn ends with [/INST]: the answer follows
  }
}

}  // namespace

const char* chat_format_name(ChatFormat format) { return info(format).name; }

ChatFormat parse_chat_format(std::string_view name) {
  std::string known;
  for (const FormatInfo& f : formats()) {
    if (name == f.name) return f.format;
    known += std::string(known.empty() ? "" : ", ") + f.name;
  }
  throw Error(ErrorCode::InvalidArgument, "chat format '" + std::string(name) + "' is not one of auto, " + known);
}

std::optional<ChatStyle> recognise_chat_template(std::string_view t) {
  ChatStyle s;
  if (contains(t, "<|im_start|>")) {
    s.format = ChatFormat::ChatML;
    s.default_system = chatml_default_system(t);
    return s;
  }
  if (contains(t, "<|start_header_id|>") && contains(t, "<|eot_id|>")) {
    s.format = ChatFormat::Llama3;
    return s;
  }
  if (contains(t, "<start_of_turn>") && contains(t, "<end_of_turn>")) {
    // Gemma 3 writes the system text into the first user turn; Gemma 1 and
    // 2 raise "System role not supported".
    s.format = ChatFormat::Gemma;
    s.system = contains(t, "first_user_prefix") ? SystemTurn::IntoFirstUser : SystemTurn::Refused;
    return s;
  }
  if (contains(t, "<|user|>") && contains(t, "<|end|>")) {
    // Phi-3-mini's first template wrote no <|system|> turn (a system message
    // vanished); later ones write one, or '<|' + role + '|>' for any role.
    s.format = ChatFormat::Phi3;
    const bool system = contains(t, "<|system|>") || contains(t, "'<|' + message['role'] + '|>'");
    s.system = system ? SystemTurn::Own : SystemTurn::Refused;
    return s;
  }
  // Mistral v0.1/v0.2: '[INST] ' + content + ' [/INST]', no system role.
  // Later variants ([INST] without spaces, [SYSTEM_PROMPT], Llama 2's
  // <<SYS>>) differ in spaces and system placement: not recognised.
  if (contains(t, "'[INST] ' + message['content'] + ' [/INST]'") && !contains(t, "<<SYS>>")) {
    s.format = ChatFormat::Mistral;
    s.system = SystemTurn::Refused;
    return s;
  }
  return std::nullopt;
}

ChatStyle choose_chat_style(std::string_view chat_template, std::string_view requested) {
  if (requested == "auto") {
    if (chat_template.empty()) return ChatStyle{};
    if (std::optional<ChatStyle> style = recognise_chat_template(chat_template)) return *style;
    throw Error(ErrorCode::Unsupported,
                "the model's tokenizer.chat_template is not a format kvg lays out (chatml, llama3, gemma, phi3, "
                "mistral [INST] v0.1/v0.2); name a format to use instead, or 'plain' for the plain layout");
  }
  ChatStyle style;
  style.format = parse_chat_format(requested);
  // A named format keeps what the template says about it, when it is that format.
  if (const std::optional<ChatStyle> recognised = recognise_chat_template(chat_template);
      recognised && recognised->format == style.format)
    return *recognised;
  // Otherwise the format's oldest templates decide: Gemma 1/2 and Mistral
  // v0.1/v0.2 have no place for a system message.
  if (style.format == ChatFormat::Gemma || style.format == ChatFormat::Mistral) style.system = SystemTurn::Refused;
  return style;
}

std::vector<std::string> chat_markers(ChatFormat format) { return info(format).markers; }

std::string_view end_of_turn_marker(ChatFormat format) { return info(format).end_of_turn; }

std::vector<ChatSegment> lay_out_chat(const ChatStyle& style, const std::vector<ChatMessage>& messages) {
  check_conversation(style, messages);
  std::vector<ChatMessage> turns(messages.begin(), messages.end());
  if (style.format == ChatFormat::ChatML && !style.default_system.empty() && turns.front().role != "system")
    turns.insert(turns.begin(), ChatMessage{"system", style.default_system});
  // Phi-3.5 writes no turn for an empty system message.
  if (style.format == ChatFormat::Phi3 && turns.front().role == "system" && turns.front().content.empty())
    turns.erase(turns.begin());
  std::string first_user_prefix;
  if (style.system == SystemTurn::IntoFirstUser && turns.front().role == "system") {
    first_user_prefix = turns.front().content + "\n\n";
    turns.erase(turns.begin());
  }
  Builder b;
  for (size_t i = 0; i < turns.size(); ++i)
    lay_out_message(style, turns[i], i == 0 ? std::string_view(first_user_prefix) : std::string_view(), b);
  lay_out_cue(style.format, b);
  return b.take();
}

std::string chat_text(std::span<const ChatSegment> segments) {
  std::string text;
  for (const ChatSegment& s : segments) text += s.text;
  return text;
}

}  // namespace kvg
