#include "extension/src/knowledge/knowledge_library.hpp"

#include <charconv>

#include "common/error.hpp"
#include "extension/src/roles/owner_rights.hpp"
#include "extension/src/spi/spi.hpp"

namespace kvg::pg {

namespace {

constexpr const char* kEntryColumns =
    "k.id, k.question, k.solution, k.answer, k.verifier, k.artifact_sha256, k.verifier_pin, k.verified_by, "
    "k.verifier_frozen";

// Shortest text that reads back as the same double.
std::string exact_text(double x) {
  char buf[64];
  const auto end = std::to_chars(buf, buf + sizeof(buf), x).ptr;
  return std::string(buf, end);
}

KnowledgeEntry entry_from(const SqlRow& r) {
  return KnowledgeEntry{std::stoll(r.at(0).value()), r.at(1).value(), r.at(2).value(), r.at(3).value(),
                        r.at(4).value(),                r.at(5).value(), r.at(6),         r.at(7).value(),
                        r.at(8)};
}

}  // namespace

std::string KnowledgeLibrary::question_key(const std::string& question) {
  const auto rows = spi_.run("SELECT kvg.normalize_question($1), kvg.question_key($1)", {question});
  if (rows.at(0).at(0).value_or("").empty())
    throw Error(ErrorCode::InvalidArgument,
                "the question is empty once normalized (case, spacing and punctuation at its ends do not count)");
  return rows[0].at(1).value();
}

std::optional<KnowledgeEntry> KnowledgeLibrary::find(const std::string& question_key) {
  const auto rows =
      spi_.run((std::string("SELECT ") + kEntryColumns + " FROM kvg.knowledge k WHERE k.question_key = $1").c_str(),
               {question_key});
  if (rows.empty()) return std::nullopt;
  return entry_from(rows.front());
}

std::vector<KnowledgeEntry> KnowledgeLibrary::related(const std::string& question, double min_similarity,
                                                      int max_entries) {
  const auto rows = spi_.run((std::string("SELECT ") + kEntryColumns +
                              " FROM kvg.related_knowledge($1, $2::float8, $3::integer) r "
                              "JOIN kvg.knowledge k ON k.id = r.id ORDER BY r.similarity, r.id DESC")
                                 .c_str(),
                             {question, exact_text(min_similarity), std::to_string(max_entries)});
  std::vector<KnowledgeEntry> entries;
  for (const SqlRow& r : rows) entries.push_back(entry_from(r));
  return entries;
}

std::optional<int64_t> KnowledgeLibrary::insert(const NewEntry& e) {
  const std::string role = calling_role();
  OwnerRights owner;  // kvg_user cannot write kvg.knowledge itself
  // ON CONFLICT waits for a concurrent insert of the same key to commit or abort.
  const auto rows = spi_.run(
      "INSERT INTO kvg.knowledge (question, question_key, solution, answer, verifier, evidence, verified_by, "
      "artifact_sha256, solve_tokens, verifier_pin, verifier_frozen) "
      "VALUES ($1, $2, $3, $4, $5, $6, $7::name, $8, $9::bigint, $10, $11) "
      "ON CONFLICT (question_key) DO NOTHING RETURNING id",
      {e.question, e.question_key, e.solution, e.answer, e.verifier, e.evidence, role, to_hex(e.artifact),
       e.solve_tokens ? SqlValue(std::to_string(*e.solve_tokens)) : std::nullopt, e.verifier_pin,
       e.verifier_frozen});
  if (rows.empty()) return std::nullopt;
  return std::stoll(rows[0].at(0).value());
}

}  // namespace kvg::pg
