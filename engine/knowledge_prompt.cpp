#include "engine/knowledge_prompt.hpp"

#include "common/error.hpp"
#include "engine/chat_prompt.hpp"
#include "engine/prompt.hpp"

namespace kvg {

namespace {

constexpr std::string_view kSolution = "{solution}";
constexpr std::string_view kQuestion = "{question}";

// The one position of `placeholder` in `text`; InvalidArgument when it is
// missing or repeated.
size_t find_once(std::string_view text, std::string_view placeholder) {
  const size_t at = text.find(placeholder);
  if (at == std::string_view::npos)
    throw Error(ErrorCode::InvalidArgument, "kvg.knowledge_template must contain " + std::string(placeholder));
  if (text.find(placeholder, at + 1) != std::string_view::npos)
    throw Error(ErrorCode::InvalidArgument,
                "kvg.knowledge_template must contain " + std::string(placeholder) + " only once");
  return at;
}

}  // namespace

KnowledgeTemplate KnowledgeTemplate::parse(std::string_view text) {
  const size_t solution = find_once(text, kSolution);
  const size_t question = find_once(text, kQuestion);
  if (question < solution)
    throw Error(ErrorCode::InvalidArgument,
                "kvg.knowledge_template must put {solution} before {question}, so that a solution's KV is a "
                "prefix shared by every question asked about it");
  KnowledgeTemplate t;
  t.head = std::string(text.substr(0, solution));
  t.middle = std::string(text.substr(solution + kSolution.size(), question - solution - kSolution.size()));
  t.tail = std::string(text.substr(question + kQuestion.size()));
  return t;
}

KnowledgeTemplate knowledge_template_for(const Model& model, std::string_view setting) {
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
