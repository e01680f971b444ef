// Depositing an entry in the library (kvg_learn, and kvg_solve's verified
// attempts): check it with its verifier, capture the artifact of its prompt
// (the chain [head solution] -> [middle question tail] of
// engine/knowledge_prompt.hpp), store the row, audit the call.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "extension/src/calls/engine_call.hpp"
#include "extension/src/knowledge/knowledge_library.hpp"
#include "extension/src/knowledge/verifier.hpp"

namespace kvg::pg {

struct Deposit {
  std::string question, solution, answer;
  Verifier verifier;
  std::optional<int64_t> solve_tokens;
};

// Refuses (42501) a role that may not write the shared library: only
// members of kvg_author (docs/security.md). deposit() checks it; kvg_solve
// checks it before it solves.
void require_depositor(Spi& spi);

// kvg_learn: the entry's id. Idempotent: the same question (by key) with the
// same solution, answer and verifier returns the stored id. Refuses an entry
// its verifier rejects (22V04) before computing anything, and a question
// already learned with something else (23505) once it meets it on insert
// (knowledge_deposit.cpp says why it inserts before it looks).
int64_t deposit(EngineCall& call, KnowledgeLibrary& library, const Deposit& entry);

// kvg_solve: deposit(), but nullopt when the question is already in the
// library, whatever its entry holds.
std::optional<int64_t> deposit_new(EngineCall& call, KnowledgeLibrary& library, const Deposit& entry);

}  // namespace kvg::pg
