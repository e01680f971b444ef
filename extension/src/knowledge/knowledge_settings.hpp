// The settings of the knowledge flywheel (docs/flywheel.md): how a knowledge
// prompt is laid out, how long a library entry's solution may be, and which
// entries transfer mode puts before a question.
#pragma once

namespace kvg::pg::settings {

// From _PG_init (module.cpp), before the kvg prefix is reserved.
void define_knowledge();

const char* knowledge_template();  // always parses (the check hook refuses others)
// kvg.max_solution_tokens: the longest solution a library entry may hold.
int max_solution_tokens();
double transfer_min_similarity();
int transfer_max_entries();

}  // namespace kvg::pg::settings
