// How kvg_answer decides what a question gets (docs/flywheel.md):
//   recurring  its key is in the library: the entry's own prompt, whose
//              artifact is grafted, so only the answer is decoded;
//   transfer   entries related to it (kvg.related_knowledge, at least
//              kvg.transfer_min_similarity, at most kvg.transfer_max_entries)
//              are put before it as context;
//   cold       nothing relevant: the question alone.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "extension/src/knowledge/knowledge_library.hpp"

namespace kvg::pg {

struct Route {
  enum class Mode { Recurring, Transfer, Cold } mode = Mode::Cold;
  // Recurring: the entry. Transfer: the context, least related first.
  std::vector<KnowledgeEntry> entries;
  // The question as the prompt states it: a recurring question is asked in
  // the entry's own words, so every spelling of it grafts the same artifact.
  std::string question;

  const char* mode_name() const;
  std::vector<std::string> contexts() const;  // the solutions to put first
  // The entry an answer is attributed to: the recurring one, or the most related.
  std::optional<int64_t> knowledge_id() const;
};

Route route_question(KnowledgeLibrary& library, const std::string& question);

}  // namespace kvg::pg
