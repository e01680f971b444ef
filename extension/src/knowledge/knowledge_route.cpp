#include "extension/src/knowledge/knowledge_route.hpp"

#include "extension/src/knowledge/knowledge_settings.hpp"

namespace kvg::pg {

const char* Route::mode_name() const {
  switch (mode) {
    case Mode::Recurring:
      return "recurring";
    case Mode::Transfer:
      return "transfer";
    case Mode::Cold:
      break;
  }
  return "cold";
}

std::vector<std::string> Route::contexts() const {
  std::vector<std::string> solutions;
  for (const KnowledgeEntry& e : entries) solutions.push_back(e.solution);
  return solutions;
}

std::optional<int64_t> Route::knowledge_id() const {
  if (entries.empty()) return std::nullopt;
  return entries.back().id;
}

Route route_question(KnowledgeLibrary& library, const std::string& question) {
  Route route;
  route.question = question;
  if (auto entry = library.find(library.question_key(question))) {
    route.mode = Route::Mode::Recurring;
    route.question = entry->question;
    route.entries.push_back(std::move(*entry));
    return route;
  }
  route.entries = library.related(question, settings::transfer_min_similarity(), settings::transfer_max_entries());
  if (!route.entries.empty()) route.mode = Route::Mode::Transfer;
  return route;
}

}  // namespace kvg::pg
