// The prompts of the knowledge flywheel, laid out by one template
// (kvg.knowledge_template, e.g. "{solution}\nQuestion: {question}\nAnswer:")
// and built as *segments*. Each segment is tokenized on its own and continues
// the tokens before it (engine/prompt.hpp), so a segment boundary is always a
// token boundary and a segment's tokens do not depend on what follows: an
// entry's solution is the same tokens at the same positions whatever
// question comes after it. That is what lets its KV be stored once as a chain
// link and grafted under every later prompt that starts with it.
//
//   knowledge prompt   [head solution] [middle question tail]
//   transfer prompt    [head solution1] [\n solution2] ... [middle question tail]
//   cold prompt        [head middle question tail]
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/knowledge_template.hpp"
#include "engine/model.hpp"

namespace kvg {

// kvg.knowledge_template's default, written for the TinyStories models the
// tests use: story text, then a question and an answer cue they can
// continue. On a model that carries its own template (the GGUF key
// kvg.knowledge_template), or else has a chat template, this default gives
// way to that (knowledge_template_for).
inline constexpr const char* kDefaultKnowledgeTemplate = "{solution}\nQuestion: {question}\nAnswer:";

// The template for `model` when kvg.knowledge_template is `setting`, by
// precedence: the setting itself when it is not the default; otherwise the
// model's own template when its file carries the kvg.knowledge_template key
// (Model::knowledge_template: the layout it was trained to read); otherwise,
// for a model whose tokenizer.chat_template kvg recognises, one user turn
// "{solution}\nQuestion: {question}" laid out in that format and the
// assistant's cue (so an instruct model is asked as it was tuned); the
// default as text for a model without one (or with a template kvg does not
// recognise).
KnowledgeTemplate knowledge_template_for(const Model& model, std::string_view setting);

// Where knowledge_template_for(model, setting) takes its template from.
enum class KnowledgeTemplateSource { Setting, Model, ChatFormat, Default };
KnowledgeTemplateSource knowledge_template_source(const Model& model, std::string_view setting);
// "setting", "model", "chat format", "default".
std::string_view knowledge_template_source_name(KnowledgeTemplateSource source);

// Between the solutions of several entries in one transfer prompt.
inline constexpr std::string_view kContextSeparator = "\n";

// The segments of the prompt for `question` after `contexts` (solutions, in
// order; none for a cold question). With markers, a solution or question
// that holds a marker's text is refused (InvalidArgument).
std::vector<std::string> knowledge_segments(const KnowledgeTemplate& tmpl, const std::vector<std::string>& contexts,
                                            std::string_view question);

struct SegmentedPrompt {
  std::vector<int32_t> tokens;
  std::vector<int64_t> ends;  // where each segment ends; increasing, back() == tokens.size()
};

// The first segment is a fresh prompt (BOS when the model adds one), each
// later one is encoded as the continuation of the tokens before it. The
// `markers` in them (KnowledgeTemplate::markers) become their special tokens.
SegmentedPrompt tokenize_segments(const Model& model, const std::vector<std::string>& segments,
                                  const ProgressCheck& check = {}, const std::vector<std::string>& markers = {});

}  // namespace kvg
