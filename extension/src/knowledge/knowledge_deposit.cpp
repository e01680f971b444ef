#include "extension/src/knowledge/knowledge_deposit.hpp"

#include "common/error.hpp"
#include "engine/knowledge_prompt.hpp"
#include "engine/prompt.hpp"
#include "extension/src/roles/owner_rights.hpp"
#include "extension/src/runs/generation_run.hpp"
#include "extension/src/calls/prefix_reuse.hpp"
#include "extension/src/knowledge/knowledge_settings.hpp"
#include "extension/src/pg/sql_raise.hpp"
#include "extension/src/roles/trusted_roles.hpp"

namespace kvg::pg {

namespace {

void require_text(const std::string& value, const char* name) {
  if (value.find_first_not_of(" \t\n\r\v\f") == std::string::npos)
    throw Error(ErrorCode::InvalidArgument, std::string(name) + " must not be empty");
}

// The same entry again is a repeat; anything else under its key a conflict.
int64_t existing_id(const KnowledgeEntry& stored, const Deposit& entry) {
  if (stored.solution == entry.solution && stored.answer == entry.answer && stored.verifier == entry.verifier.spec &&
      stored.verifier_pin == entry.verifier.pin && stored.verifier_frozen == entry.verifier.frozen)
    return stored.id;
  raise_sqlstate("23505",
                 "the question is already in the library (entry " + std::to_string(stored.id) +
                     ") with another solution, answer or verifier",
                 "The library keeps one verified solution per question; to replace it, delete the entry from "
                 "kvg.knowledge and learn again.");
}

// The entry's prompt, computed once (in this backend or in the engine
// worker: kvg.engine), grafting whatever stored chain already begins it: its
// artifact's identity is known before anything is stored, and its links are
// stored only for a new entry.
class EntryPrompt {
 public:
  EntryPrompt(EngineCall& call, const Deposit& entry)
      : tmpl_(knowledge_template_for(*call.model, settings::knowledge_template())),
        prompt_(tokenize_segments(*call.model, knowledge_segments(tmpl_, {entry.solution}, entry.question),
                                  kCheckInterrupts, tmpl_.markers)) {
    GenerateOptions options;
    options.max_new_tokens = 0;  // its KV only
    options.prefill_chunk = kPrefillChunk;
    options.check = kCheckInterrupts;
    GenerationAsks asks;
    asks.link_ends = prompt_.ends;
    run_ = run_generation(call, prompt_.tokens, {}, options, asks);
    leaf_ = *run_.links_leaf();
  }

  const Digest& leaf() const { return leaf_; }
  void store(EngineCall& call) const {
    if (*run_.store_links(call) != leaf_)
      throw Error(ErrorCode::Internal, "the entry's stored chain is not the one it was inserted with");
  }
  // Its share of a learn's audit row.
  void describe(AuditRecord& audit) const {
    audit.tokens_in = int32_t(prompt_.tokens.size());
    audit.tokens_grafted = int32_t(run_.grafted.tokens);
    audit.graft_us = run_.grafted.micros;
    audit.prefill_us = to_micros(run_.result.prefill_seconds);
  }

 private:
  KnowledgeTemplate tmpl_;
  SegmentedPrompt prompt_;
  GenerationRun run_;
  Digest leaf_{};
};

// Entries are bounded when they are deposited (kvg.max_solution_tokens), so
// that nobody's entries crowd everybody's questions out of the context.
void check_solution_tokens(const Model& model, const std::string& solution) {
  const int limit = settings::max_solution_tokens();
  check_prompt_bytes(model, solution.size(), "solution");
  const size_t n = fresh_prompt(model, solution, kCheckInterrupts).size();
  if (n > size_t(limit))
    raise_sqlstate("54000",
                   "the solution is " + std::to_string(n) + " tokens long, more than kvg.max_solution_tokens (" +
                       std::to_string(limit) + ")",
                   "Shorten it, or ask a superuser to raise kvg.max_solution_tokens (docs/security.md).");
}

}  // namespace

void require_depositor(Spi& spi) {
  // The shared library is what other users' answers are built from.
  require_author(spi, "depositing into the shared library",
                 "Every user's answers are routed to the library's entries; a superuser grants kvg_author to the "
                 "roles trusted to write them (docs/security.md).");
}

namespace {

// Checks the entry, computes its prompt, inserts the row and only then
// stores the prompt's links (a taken key stores nothing; the row's link to
// its artifact is checked at commit: kvg.knowledge_artifact_check). Inserts
// before it looks: under SERIALIZABLE, looking up an absent key locks the
// index page that concurrent learners insert into (SSI's predicate locks on a
// B-tree are per page), so two learners of different questions would fail
// each other at commit. An insert reads nothing; only learners of the same
// question meet, in ON CONFLICT. The price: a repeat computes its prompt
// again, grafted from its stored chain (docs/flywheel.md). Returns the new
// entry's id, or nullopt when `key` is taken.
std::optional<int64_t> insert_entry(EngineCall& call, KnowledgeLibrary& library, const Deposit& entry,
                                    const std::string& key, const EntryPrompt& prompt) {
  // ON CONFLICT waits for a concurrent learn of the same question to commit.
  const std::optional<int64_t> id =
      library.insert(NewEntry{entry.question, key, entry.solution, entry.answer, entry.verifier.spec,
                              evidence(entry.verifier, entry.answer), entry.verifier.pin, entry.verifier.frozen, prompt.leaf(),
                              entry.solve_tokens});
  if (id) prompt.store(call);
  return id;
}

// What a deposit checks before any work; returns the question's key.
std::string check_entry(EngineCall& call, KnowledgeLibrary& library, const Deposit& entry) {
  require_depositor(call.spi);
  require_text(entry.question, "question");
  require_text(entry.solution, "solution");
  require_text(entry.answer, "answer");
  check_solution_tokens(*call.model, entry.solution);
  if (entry.solve_tokens && *entry.solve_tokens < 0)
    throw Error(ErrorCode::InvalidArgument, "solve_tokens must be at least 0");
  std::string key = library.question_key(entry.question);  // refuses a question that normalizes to nothing
  // contains checks the solution against the answer; the other verifiers
  // carry their own expectation of the answer.
  const std::string& candidate = entry.verifier.kind == Verifier::Kind::Contains ? entry.solution : entry.answer;
  const Verdict verdict = check(call.spi, entry.verifier,
                                entry.question, candidate, entry.answer);
  if (!verdict.passed)
    raise_sqlstate("22V04",
                   "the entry fails its verifier " + entry.verifier.spec +
                       (entry.verifier.kind == Verifier::Kind::Contains ? ": the solution does not contain the answer"
                        : verdict.refusal                                 ? " (" + *verdict.refusal + ")"
                                                                          : ": the answer is not accepted"),
                   "Only verified entries are learned; nothing was stored.");
  return key;
}

void audit_learn(EngineCall& call, const Deposit& entry, const EntryPrompt& prompt, int64_t id,
                 const std::string& artifact) {
  AuditRecord audit = call.audit("learn");
  audit.input_sha256 = text_sha256(entry.question);
  audit.verified = true;
  audit.kv_proven = true;  // its prompt is grafted from trusted links or computed
  audit.artifact_sha256 = artifact;
  prompt.describe(audit);
  audit.knowledge_id = id;
  audit_append(call.spi, audit);
}

}  // namespace

int64_t deposit(EngineCall& call, KnowledgeLibrary& library, const Deposit& entry) {
  const std::string key = check_entry(call, library, entry);
  const EntryPrompt prompt(call, entry);
  if (const auto id = insert_entry(call, library, entry, key, prompt)) {
    audit_learn(call, entry, prompt, *id, to_hex(prompt.leaf()));
    return *id;
  }
  // The key was taken before this transaction's snapshot (one taken after it
  // is a serialization failure in ON CONFLICT, under REPEATABLE READ and up).
  const KnowledgeEntry stored = library.find(key).value();
  const int64_t id = existing_id(stored, entry);
  audit_learn(call, entry, prompt, id, stored.artifact_sha256);
  return id;
}

std::optional<int64_t> deposit_new(EngineCall& call, KnowledgeLibrary& library, const Deposit& entry) {
  const std::string key = check_entry(call, library, entry);
  const EntryPrompt prompt(call, entry);
  const std::optional<int64_t> id = insert_entry(call, library, entry, key, prompt);
  if (id) audit_learn(call, entry, prompt, *id, to_hex(prompt.leaf()));
  return id;
}

}  // namespace kvg::pg
