#include "engine/knowledge_prompt.hpp"

#include "common/error.hpp"
#include "engine/chat_prompt.hpp"
#include "engine/prompt.hpp"

namespace kvg {

std::string_view knowledge_template_source_name(KnowledgeTemplateSource source) {
  switch (source) {
    case KnowledgeTemplateSource::Setting: return "setting";
    case KnowledgeTemplateSource::Model: return "model";
    case KnowledgeTemplateSource::ChatFormat: return "chat format";
    case KnowledgeTemplateSource::Default: return "default";
  }
  return "default";
}

KnowledgeTemplateSource knowledge_template_source(const Model& model, std::string_view setting) {
  if (setting != kDefaultKnowledgeTemplate) return KnowledgeTemplateSource::Setting;
  if (model.knowledge_template()) return KnowledgeTemplateSource::Model;
  const std::string& chat_template = model.tokenizer().chat_template();
  if (!chat_template.empty() && recognise_chat_template(chat_template)) return KnowledgeTemplateSource::ChatFormat;
  return KnowledgeTemplateSource::Default;
}

KnowledgeTemplate knowledge_template_for(const Model& model, std::string_view setting) {
  // The model's own key comes before the chat format: it names the layout
  // the model was trained to read.
  if (setting == kDefaultKnowledgeTemplate && model.knowledge_template())
    return KnowledgeTemplate::parse(*model.knowledge_template());
  const std::string& chat_template = model.tokenizer().chat_template();
  const bool follow_chat = setting == kDefaultKnowledgeTemplate && !chat_template.empty();
  const std::optional<ChatStyle> style = follow_chat ? recognise_chat_template(chat_template) : std::nullopt;
  if (!style) return KnowledgeTemplate::parse(setting);
  const ChatMessage turn{"user", "{solution}\nQuestion: {question}"};
  KnowledgeTemplate t = KnowledgeTemplate::parse(chat_text(lay_out_chat(*style, {turn})));
  t.markers = special_markers(model.tokenizer(), style->format);
  const std::string_view end = end_of_turn_marker(style->format);
  if (const int32_t id = end.empty() ? -1 : model.tokenizer().special_id(end); id >= 0) t.stop_tokens.push_back(id);
  return t;
}

std::vector<std::string> knowledge_segments(const KnowledgeTemplate& tmpl, const std::vector<std::string>& contexts,
                                            std::string_view question) {
  for (const std::string& c : contexts) refuse_marker_text(c, tmpl.markers, "a knowledge solution");
  refuse_marker_text(question, tmpl.markers, "the question");
  std::vector<std::string> segments;
  for (size_t i = 0; i < contexts.size(); ++i)
    segments.push_back((i == 0 ? tmpl.head : std::string(kContextSeparator)) + contexts[i]);
  std::string last = contexts.empty() ? tmpl.head : std::string();
  last += tmpl.middle;
  last += question;
  last += tmpl.tail;
  segments.push_back(std::move(last));
  return segments;
}

SegmentedPrompt tokenize_segments(const Model& model, const std::vector<std::string>& segments,
                                  const ProgressCheck& check, const std::vector<std::string>& markers) {
  size_t bytes = 0;
  for (const std::string& segment : segments) bytes += segment.size();
  check_prompt_bytes(model, bytes, "knowledge prompt");
  SegmentedPrompt prompt;
  for (const std::string& segment : segments) {
    std::vector<int32_t> tokens;
    if (markers.empty()) {
      tokens = prompt.tokens.empty() ? fresh_prompt(model, segment, check)
                                     : model.tokenizer().encode_continuation(segment, check);
    } else {
      const bool fresh = prompt.tokens.empty();
      if (fresh && model.tokenizer().add_bos()) tokens.push_back(model.tokenizer().bos());
      append_segment_tokens(model.tokenizer(), split_at_markers(segment, markers), !fresh, tokens, check);
    }
    // A segment that encodes to nothing adds no boundary (links hold >= 1 token).
    if (tokens.empty()) continue;
    prompt.tokens.insert(prompt.tokens.end(), tokens.begin(), tokens.end());
    check_prompt_tokens(model, prompt.tokens.size());
    prompt.ends.push_back(int64_t(prompt.tokens.size()));
  }
  if (prompt.tokens.empty()) throw Error(ErrorCode::InvalidArgument, "the prompt is empty");
  return prompt;
}

}  // namespace kvg
