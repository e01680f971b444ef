// The knowledge flywheel of `kvg eval`, in one process: a library of verified
// entries, the artifacts of their prompts (kept in memory), the index of
// chain links that prefix search reads, and routing as docs/flywheel.md
// describes it. The prompts, segments, captures, grafts and answer lines are
// the engine's own (engine/knowledge_prompt.hpp, prefix_search.hpp,
// graft.hpp, answer_line.hpp), the same code kvg_learn and kvg_answer_detail
// run in the database.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/graft.hpp"
#include "engine/knowledge_prompt.hpp"
#include "engine/memory_artifacts.hpp"
#include "engine/prefix_search.hpp"
#include "engine/session.hpp"

namespace kvg::cli {

// kvg.normalize_question: ASCII letters lower-cased, whitespace runs one
// space, ASCII spaces and punctuation stripped from both ends.
std::string normalize_question(std::string_view question);

// The words routing compares: answer_words without English stop words. The
// database compares English lexemes (to_tsvector('english'), stemmed); on
// questions whose words are codes and numbers, as the generators', the two
// are the same sets.
std::set<std::string> routing_words(std::string_view text);

struct EvalEntry {
  std::string question, solution, answer, verifier;
  std::set<std::string> words;  // of question and solution
  Digest leaf{};                // the artifact of the entry's prompt
};

struct EvalRoute {
  enum class Mode { Cold, Recurring, Transfer } mode = Mode::Cold;
  std::string question;                   // the entry's wording when recurring
  std::vector<const EvalEntry*> entries;  // the recurring entry, or the transfer contexts (most similar last)
  const char* mode_name() const;
};

struct Deposited {
  bool stored = false;      // false: the verifier rejected the solution
  int64_t computed = 0;     // prompt tokens computed for the capture
};

class EvalLibrary {
 public:
  EvalLibrary(std::shared_ptr<const Model> model, EngineOptions options, KnowledgeTemplate tmpl,
              double min_similarity, int max_entries);

  // kvg_learn's path: check the solution with the verifier, capture the
  // entry's prompt (grafting whatever stored chain begins it) as the chain
  // [head solution] -> [middle question tail], and keep the entry. A question
  // already learned is not learned again.
  Deposited learn(const std::string& question, const std::string& solution, const std::string& answer,
                  const std::string& verifier);

  // kvg_answer_detail's routing: recurring by question key, else transfer to
  // entries sharing at least min_similarity of the question's words (most
  // similar first, then the earliest learned), else cold.
  EvalRoute route(const std::string& question) const;

  // Grafts into `session` (empty) the longest stored chain beginning
  // `prompt`; returns its leaf and how many positions it filled.
  StoredPrefix graft_longest(Session& session, std::span<const int32_t> prompt);

  ArtifactOpener opener() { return artifacts_.opener(); }
  const std::shared_ptr<const Model>& model() const { return model_; }
  const EngineOptions& options() const { return options_; }
  const KnowledgeTemplate& knowledge_template() const { return tmpl_; }
  size_t size() const { return entries_.size(); }

 private:
  // Stores positions [from, ends...) of the session as chain links after
  // `parent`, one per segment end; returns the last.
  std::optional<Digest> store_links(const Session& session, std::optional<Digest> parent, int64_t from,
                                    std::span<const int64_t> ends);

  std::shared_ptr<const Model> model_;
  EngineOptions options_;
  KnowledgeTemplate tmpl_;
  double min_similarity_;
  int max_entries_;
  std::vector<std::unique_ptr<EvalEntry>> entries_;  // in learning order
  std::map<std::string, const EvalEntry*> by_key_;
  MemoryArtifacts artifacts_;
  // (parent, SHA-256 of the link's own tokens) -> links: kvg.artifacts'
  // (parent_sha256, tokens_sha256) index.
  std::map<std::pair<std::optional<Digest>, Digest>, std::vector<StoredLink>> links_;
};

}  // namespace kvg::cli
