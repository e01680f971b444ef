// The items `kvg eval` evaluates: a question, its right answer, the verifier
// that checks an answer, and optionally a verified worked solution. Read from
// JSONL ({"question", "answer", "verifier", "solution"?}, one object a line)
// or made by a generator (cli/eval/eval_generator.hpp).
#pragma once

#include <string>
#include <vector>

namespace kvg::cli {

struct EvalItem {
  std::string question;
  std::string answer;
  std::string verifier = "contains";  // the forms of docs/flywheel.md "Verifiers" that need no database
  std::string solution;               // empty: none given (the model must solve it cold to deposit it)
  // Optional labels a report groups by ("kind": e.g. "seen" / "unseen" for the
  // generator's families the model was or was not trained on).
  std::string kind;
  std::string family;
};

// Reads a JSONL file. Blank lines are skipped; a malformed line, a missing
// or empty question or answer, an unknown verifier, or a file without items
// is an InvalidArgument error naming the file and line.
std::vector<EvalItem> read_eval_items(const std::string& path);

// One JSON object per item, every field (the format read_eval_items reads).
std::string eval_items_jsonl(const std::vector<EvalItem>& items);

}  // namespace kvg::cli
