// libFuzzer harness: the chat template recogniser and the layout
// (engine/chat_template.cpp) with the messages JSON reader
// (engine/chat_messages.cpp). The input is a template and a messages JSON,
// split at the first NUL byte. Every input must give a style or nullopt, and
// messages or a kvg::Error; every layout must be the messages' text and the
// format's own markers, nothing else.
#include <cstdint>
#include <string>
#include <string_view>

#include "common/error.hpp"
#include "engine/chat_messages.hpp"
#include "engine/chat_template.hpp"

namespace {

bool is_marker_of(kvg::ChatFormat format, const std::string& text) {
  for (const std::string& m : kvg::chat_markers(format))
    if (m == text) return true;
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view tmpl = input.substr(0, nul);
  const std::string_view json = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  const std::optional<kvg::ChatStyle> recognised = kvg::recognise_chat_template(tmpl);
  std::vector<kvg::ChatMessage> messages;
  try {
    messages = kvg::parse_chat_messages(json);
  } catch (const kvg::Error&) {
    return 0;
  }
  size_t content_bytes = 0;
  for (const kvg::ChatMessage& m : messages) content_bytes += m.content.size();
  for (const kvg::ChatFormat f : {kvg::ChatFormat::Plain, kvg::ChatFormat::ChatML, kvg::ChatFormat::Llama3,
                                  kvg::ChatFormat::Gemma, kvg::ChatFormat::Phi3, kvg::ChatFormat::Mistral}) {
    kvg::ChatStyle style = recognised && recognised->format == f ? *recognised : kvg::ChatStyle{f};
    try {
      const std::vector<kvg::ChatSegment> segments = kvg::lay_out_chat(style, messages);
      size_t text_bytes = 0;
      for (const kvg::ChatSegment& s : segments) {
        if (s.marker && !is_marker_of(f, s.text)) __builtin_trap();  // a marker the format does not have
        if (!s.marker) text_bytes += s.text.size();
      }
      // Markers aside, the layout adds a bounded amount of text per message.
      if (text_bytes > content_bytes + style.default_system.size() + 32 * (messages.size() + 2)) __builtin_trap();
    } catch (const kvg::Error&) {
    }
  }
  return 0;
}
