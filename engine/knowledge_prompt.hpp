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

#include "engine/model.hpp"

namespace kvg {

// kvg.knowledge_template's default, written for the TinyStories models the
// tests use: story text, then a question and an answer cue they can
// continue. On a model with a chat template this default is laid out in the
// model's chat format instead (knowledge_template_for).
inline constexpr const char* kDefaultKnowledgeTemplate = "{solution}\nQuestion: {question}\nAnswer:";

struct KnowledgeTemplate {
  std::string head;    // text before {solution}
  std::string middle;  // text between {solution} and {question}
  std::string tail;    // text after {question}: the answer cue
  // The chat format's markers in head, middle and tail that are tokenized as
  // their special tokens (engine/chat_prompt.hpp); empty for a template given
  // as text, which is all text.
  std::vector<std::string> markers;
  // Where an answer ends besides EOS and the vocabulary's end-of-turn tokens:
  // the chat format's end marker when it is a token of the vocabulary (an
  // instruct model closes its turn with it, and it need not be EOS: Gemma's
  // <end_of_turn>). Empty for a template given as text.
  std::vector<int32_t> stop_tokens;

  // The template must hold {solution} and then {question}, once each: the
  // solution comes first so that its KV is a prefix shared by every question
  // asked about it. Throws InvalidArgument otherwise.
  static KnowledgeTemplate parse(std::string_view text);
};

// The template for `model` when kvg.knowledge_template is `setting`: the
// setting itself when it is not the default; otherwise, for a model whose
// tokenizer.chat_template kvg recognises, one user turn "{solution}\nQuestion:
// {question}" laid out in that format and the assistant's cue (so an
// instruct model is asked as it was tuned); the default as text for a model
// without one (or with a template kvg does not recognise).
KnowledgeTemplate knowledge_template_for(const Model& model, std::string_view setting);

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
