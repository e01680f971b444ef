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

struct KnowledgeTemplate {
  std::string head;    // text before {solution}
  std::string middle;  // text between {solution} and {question}
  std::string tail;    // text after {question}: the answer cue

  // The template must hold {solution} and then {question}, once each: the
  // solution comes first so that its KV is a prefix shared by every question
  // asked about it. Throws InvalidArgument otherwise.
  static KnowledgeTemplate parse(std::string_view text);
};

// Between the solutions of several entries in one transfer prompt.
inline constexpr std::string_view kContextSeparator = "\n";

// The segments of the prompt for `question` after `contexts` (solutions, in
// order; none for a cold question).
std::vector<std::string> knowledge_segments(const KnowledgeTemplate& tmpl, const std::vector<std::string>& contexts,
                                            std::string_view question);

struct SegmentedPrompt {
  std::vector<int32_t> tokens;
  std::vector<int64_t> ends;  // where each segment ends; increasing, back() == tokens.size()
};

// The first segment is a fresh prompt (BOS when the model adds one), each
// later one is encoded as the continuation of the tokens before it.
SegmentedPrompt tokenize_segments(const Model& model, const std::vector<std::string>& segments,
                                  const ProgressCheck& check = {});

}  // namespace kvg
