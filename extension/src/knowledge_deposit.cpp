#include "extension/src/knowledge_deposit.hpp"

#include "common/error.hpp"
#include "engine/knowledge_prompt.hpp"
#include "engine/prompt.hpp"
#include "extension/src/owner_rights.hpp"
#include "extension/src/prefix_reuse.hpp"
#include "extension/src/settings.hpp"
#include "extension/src/sql_raise.hpp"
#include "extension/src/trusted_roles.hpp"

namespace kvg::pg {

namespace {

void require_text(const std::string& value, const char* name) {
  if (value.find_first_not_of(" \t\n\r\v\f") == std::string::npos)
    throw Error(ErrorCode::InvalidArgument, std::string(name) + " must not be empty");
}

// The same entry again is a repeat; anything else under its key a conflict.
int64_t existing_id(const KnowledgeEntry& stored, const Deposit& entry) {
  if (stored.solution == entry.solution && stored.answer == entry.answer && stored.verifier == entry.verifier.spec &&
      stored.verifier_pin == entry.verifier.pin)
    return stored.id;
  raise_sqlstate("23505",
                 "the question is already in the library (entry " + std::to_string(stored.id) +
                     ") with another solution, answer or verifier",
                 "The library keeps one verified solution per question; to replace it, delete the entry from "
                 "kvg.knowledge and learn again.");
}

struct Captured {
  Digest leaf{};
  int64_t tokens = 0, grafted = 0, graft_us = 0, prefill_us = 0;
};

// The artifact chain of the entry's prompt, computing only what no stored
// chain already holds.
Captured capture_prompt(EngineCall& call, const Deposit& entry) {
  const KnowledgeTemplate tmpl = knowledge_template_for(*call.model, settings::knowledge_template());
  const SegmentedPrompt prompt =
      tokenize_segments(*call.model, knowledge_segments(tmpl, {entry.solution}, entry.question), kCheckInterrupts,
                        tmpl.markers);
  Session session(call.model, call.options);
  const Grafted grafted = graft_stored_prefix(call, session, prompt.tokens);
  const auto began = std::chrono::steady_clock::now();
  session.prefill(std::span<const int32_t>(prompt.tokens).subspan(size_t(session.n_past())), kPrefillChunk,
                  LogitsFor::None, nullptr, kCheckInterrupts);
  const int64_t prefill_us = micros_since(began);
  Captured c;
  c.leaf = *store_segment_links(call, session, grafted, prompt.ends);
  c.tokens = int64_t(prompt.tokens.size());
  c.grafted = grafted.tokens;
  c.graft_us = grafted.micros;
  c.prefill_us = prefill_us;
  return c;
}

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

// Checks the entry, then inserts it with the artifact of its prompt. Inserts
// before looking: under SERIALIZABLE, looking up an absent key locks the
// index page that concurrent learners insert into (SSI's predicate locks on
// a B-tree are per page), so two learners of different questions would fail
// each other at commit. An insert reads nothing; only learners of the same
// question meet, in ON CONFLICT. What that costs: a repeat or a conflicting
// entry captures its prompt first, grafted from its stored chain when there
// is one, and a conflict leaves the links for kvg_vacuum (docs/flywheel.md).
struct Inserted {
  std::optional<int64_t> id;  // nullopt: the key is taken
  std::string key;
  Captured captured;
};

Inserted insert_entry(EngineCall& call, KnowledgeLibrary& library, const Deposit& entry) {
  require_depositor(call.spi);
  require_text(entry.question, "question");
  require_text(entry.solution, "solution");
  require_text(entry.answer, "answer");
  check_solution_tokens(*call.model, entry.solution);
  if (entry.solve_tokens && *entry.solve_tokens < 0)
    throw Error(ErrorCode::InvalidArgument, "solve_tokens must be at least 0");
  Inserted in;
  in.key = library.question_key(entry.question);
  // contains checks the solution against the answer; the other verifiers
  // carry their own expectation of the answer.
  const std::string& candidate = entry.verifier.kind == Verifier::Kind::Contains ? entry.solution : entry.answer;
  const Verdict verdict = check(call.spi, StoredVerifier{entry.verifier.spec, entry.verifier.pin},
                                entry.question, candidate, entry.answer);
  if (!verdict.passed)
    raise_sqlstate("22V04",
                   "the entry fails its verifier " + entry.verifier.spec +
                       (entry.verifier.kind == Verifier::Kind::Contains ? ": the solution does not contain the answer"
                        : verdict.refusal                                 ? " (" + *verdict.refusal + ")"
                                                                          : ": the answer is not accepted"),
                   "Only verified entries are learned; nothing was stored.");
  in.captured = capture_prompt(call, entry);
  // ON CONFLICT waits for a concurrent learn of the same question to commit.
  in.id = library.insert(NewEntry{entry.question, in.key, entry.solution, entry.answer, entry.verifier.spec,
                                  evidence(entry.verifier, entry.answer), entry.verifier.pin, in.captured.leaf,
                                  entry.solve_tokens});
  return in;
}

void audit_learn(EngineCall& call, const Deposit& entry, const Captured& c, int64_t id,
                 const std::string& artifact) {
  AuditRecord audit = call.audit("learn");
  audit.input_sha256 = text_sha256(entry.question);
  audit.verified = true;
  audit.kv_proven = true;  // its prompt is grafted from trusted links or computed
  audit.artifact_sha256 = artifact;
  audit.tokens_in = int32_t(c.tokens);
  audit.tokens_grafted = int32_t(c.grafted);
  audit.graft_us = c.graft_us;
  audit.prefill_us = c.prefill_us;
  audit.knowledge_id = id;
  audit_append(call.spi, audit);
}

}  // namespace

int64_t deposit(EngineCall& call, KnowledgeLibrary& library, const Deposit& entry) {
  const Inserted in = insert_entry(call, library, entry);
  if (in.id) {
    audit_learn(call, entry, in.captured, *in.id, to_hex(in.captured.leaf));
    return *in.id;
  }
  // The key was taken before this transaction's snapshot (one taken after it
  // is a serialization failure in ON CONFLICT, under REPEATABLE READ and up).
  const KnowledgeEntry stored = library.find(in.key).value();
  const int64_t id = existing_id(stored, entry);
  audit_learn(call, entry, in.captured, id, stored.artifact_sha256);
  return id;
}

std::optional<int64_t> deposit_new(EngineCall& call, KnowledgeLibrary& library, const Deposit& entry) {
  const Inserted in = insert_entry(call, library, entry);
  if (in.id) audit_learn(call, entry, in.captured, *in.id, to_hex(in.captured.leaf));
  return in.id;
}

}  // namespace kvg::pg
