// kvg.knowledge as C++ sees it: finding an entry by question key, finding
// related entries, and adding one. Reads run as the caller (kvg_user may read
// the library); the insert runs with the owner's rights (owner_rights.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "storage/sha256.hpp"

namespace kvg::pg {

class Spi;

struct KnowledgeEntry {
  int64_t id = 0;
  std::string question;
  std::string solution;
  std::string answer;
  std::string verifier;  // canonical (verifier.hpp)
  std::string artifact_sha256;
  std::optional<std::string> verifier_pin;  // function verifiers (verifier.hpp)
  std::string verified_by;                  // the depositor
  std::optional<std::string> verifier_frozen;  // function verifiers: the copy that runs
};

struct NewEntry {
  std::string question, question_key, solution, answer, verifier, evidence;
  std::optional<std::string> verifier_pin, verifier_frozen;
  Digest artifact{};
  std::optional<int64_t> solve_tokens;
};

class KnowledgeLibrary {
 public:
  explicit KnowledgeLibrary(Spi& spi) : spi_(spi) {}

  // kvg.question_key: SHA-256 of the normalized question; InvalidArgument
  // when nothing is left of it after normalization.
  std::string question_key(const std::string& question);
  std::optional<KnowledgeEntry> find(const std::string& question_key);
  // Entries related to `question` (kvg.related_knowledge), least similar
  // first, so that the most related one stands closest to the question.
  std::vector<KnowledgeEntry> related(const std::string& question, double min_similarity, int max_entries);
  // The new entry's id, or nullopt when its key is already taken (also by a
  // concurrent transaction, which this waits for).
  std::optional<int64_t> insert(const NewEntry& entry);

 private:
  Spi& spi_;
};

}  // namespace kvg::pg
