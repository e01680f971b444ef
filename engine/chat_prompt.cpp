#include "engine/chat_prompt.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "engine/prompt.hpp"

namespace kvg {

ChatStyle model_chat_style(const Tokenizer& tokenizer, std::string_view requested) {
  return choose_chat_style(tokenizer.chat_template(), requested);
}

std::vector<std::string> special_markers(const Tokenizer& tokenizer, ChatFormat format) {
  std::vector<std::string> out;
  for (std::string& m : chat_markers(format))
    if (tokenizer.special_id(m) >= 0) out.push_back(std::move(m));
  std::stable_sort(out.begin(), out.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  return out;
}

void append_segment_tokens(const Tokenizer& tokenizer, std::span<const ChatSegment> segments, bool continuation,
                           std::vector<int32_t>& out, const ProgressCheck& check) {
  std::string run;
  bool run_at_start = true;  // no marker token before the run
  auto flush = [&] {
    if (run.empty()) return;
    const std::vector<int32_t> ids = continuation && run_at_start ? tokenizer.encode_continuation(run, check)
                                                                  : tokenizer.encode(run, false, check);
    out.insert(out.end(), ids.begin(), ids.end());
    run.clear();
  };
  for (const ChatSegment& s : segments) {
    const int32_t id = s.marker ? tokenizer.special_id(s.text) : -1;
    if (id < 0) {
      run += s.text;
      continue;
    }
    flush();
    out.push_back(id);
    run_at_start = false;
  }
  flush();
}

std::vector<ChatSegment> split_at_markers(std::string_view text, const std::vector<std::string>& markers) {
  std::vector<ChatSegment> out;
  size_t from = 0, at = 0;
  while (at < text.size()) {
    const auto hit = std::find_if(markers.begin(), markers.end(), [&](const std::string& m) {
      return !m.empty() && text.compare(at, m.size(), m) == 0;
    });
    if (hit == markers.end()) {
      ++at;
      continue;
    }
    if (at > from) out.push_back({std::string(text.substr(from, at - from)), false});
    out.push_back({*hit, true});
    at += hit->size();
    from = at;
  }
  if (from < text.size()) out.push_back({std::string(text.substr(from)), false});
  return out;
}

void refuse_marker_text(std::string_view text, const std::vector<std::string>& markers, const std::string& what) {
  for (const std::string& m : markers)
    if (text.find(m) != std::string_view::npos)
      throw Error(ErrorCode::InvalidArgument,
                  what + " contains the text \"" + m + "\", which is a marker of the chat format: kvg reads message "
                  "text as text, never as a marker, so it refuses text that would read as one");
}

ChatPrompt chat_prompt(const Model& model, const ChatStyle& style, const std::vector<ChatMessage>& messages,
                       const ProgressCheck& check, int64_t context) {
  const Tokenizer& tok = model.tokenizer();
  ChatPrompt p;
  p.style = style;
  p.segments = lay_out_chat(style, messages);
  p.text = chat_text(p.segments);
  check_prompt_bytes(model, p.text.size(), "chat prompt", context);
  const std::vector<std::string> markers = special_markers(tok, style.format);
  for (size_t i = 0; i < messages.size(); ++i)
    refuse_marker_text(messages[i].content, markers,
                       "chat message " + std::to_string(i + 1) + " (" + messages[i].role + ")");
  if (tok.add_bos()) p.tokens.push_back(tok.bos());
  append_segment_tokens(tok, p.segments, false, p.tokens, check);
  if (p.tokens.empty()) throw Error(ErrorCode::InvalidArgument, "the chat prompt is empty");
  check_prompt_tokens(model, p.tokens.size(), context);
  const std::string_view end = end_of_turn_marker(style.format);
  if (const int32_t id = end.empty() ? -1 : tok.special_id(end); id >= 0) p.stop_tokens.push_back(id);
  return p;
}

}  // namespace kvg
