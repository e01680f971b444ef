#include "cli/eval/eval_answer.hpp"

#include <chrono>

#include "engine/answer_line.hpp"
#include "engine/generate.hpp"
#include "engine/output_text.hpp"

namespace kvg::cli {

EvalAnswer answer_question(EvalLibrary& library, const std::string& question, int64_t max_tokens, bool cold) {
  const EvalRoute route = cold ? EvalRoute{EvalRoute::Mode::Cold, question, {}} : library.route(question);
  std::vector<std::string> contexts;
  for (const EvalEntry* e : route.entries) contexts.push_back(e->solution);
  const KnowledgeTemplate& tmpl = library.knowledge_template();
  const Model& model = *library.model();
  const SegmentedPrompt prompt =
      tokenize_segments(model, knowledge_segments(tmpl, contexts, route.question), {}, tmpl.markers);
  const int64_t n = int64_t(prompt.tokens.size());

  const auto began = std::chrono::steady_clock::now();
  Session session(library.model(), library.options());
  const StoredPrefix grafted = library.graft_longest(session, prompt.tokens);
  AnswerLine line(model.tokenizer(), prompt.tokens.back());
  GenerateOptions options;
  options.max_new_tokens = max_tokens;
  options.stop_tokens = tmpl.stop_tokens;
  options.on_token = [&line](int32_t token) { return line.feed(token); };
  const GenerateResult r =
      generate(session, std::span<const int32_t>(prompt.tokens).subspan(size_t(session.n_past())), options);
  const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - began;

  EvalAnswer a;
  a.answer = output_text(line.answer());
  a.mode = route.mode_name();
  a.prompt_tokens = n;
  // A wholly grafted prompt has its last token evaluated again for its logits.
  a.grafted_tokens = grafted.end < n ? grafted.end : n - 1;
  a.decoded_tokens = int64_t(r.tokens.size());
  a.ms = took.count();
  a.leaf = grafted.leaf;
  a.tokens = prompt.tokens;
  a.tokens.insert(a.tokens.end(), r.tokens.begin(), r.tokens.end());
  return a;
}

}  // namespace kvg::cli
