// A knowledge template split at its placeholders (KnowledgeTemplate::parse):
// the text of kvg.knowledge_template, of `kvg eval --template`, or of a
// model's own kvg.knowledge_template key (engine/model.hpp checks that one at
// load). Apart from engine/knowledge_prompt.hpp, which lays prompts out with
// it, so that the model's loader can check a template without depending on
// the prompt code (which depends on the model).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvg {

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

}  // namespace kvg
