#include "engine/knowledge_template.hpp"

#include "common/error.hpp"

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

}  // namespace kvg
