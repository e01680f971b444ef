// Depositing an entry in the library (kvg_learn, and kvg_solve's verified
// attempts): check it with its verifier, capture the artifact of its prompt
// (the chain [head solution] -> [middle question tail] of
// engine/knowledge_prompt.hpp), store the row, audit the call.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "extension/src/engine_call.hpp"
#include "extension/src/knowledge_library.hpp"
#include "extension/src/verifier.hpp"

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

// The entry's id. Idempotent: the same question (by key) with the same
// solution, answer and verifier returns the stored id and stores nothing.
// Refuses an entry its verifier rejects (22V04) and a question already
// learned with something else (23505), before computing anything.
int64_t deposit(EngineCall& call, KnowledgeLibrary& library, const Deposit& entry);

}  // namespace kvg::pg
