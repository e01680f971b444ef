// The settings of the knowledge flywheel (docs/flywheel.md): how a knowledge
// prompt is laid out, how long a library entry's solution may be, and which
// entries transfer mode puts before a question.
#pragma once

namespace kvg::pg::settings {

// From _PG_init (module.cpp), before the kvg prefix is reserved.
void define_knowledge();

const char* knowledge_template();  // always parses (the check hook refuses others)
// Whether the template in effect is the server's (its default, the
// configuration file, ALTER SYSTEM, the command line), not one a user chose
// (SET, a role's or a database's setting, the connection): only then are the
// links an answer composes from entries the library's to pay for, since a
// user's template puts text of the user's into them (lo_store.hpp, Payer).
bool knowledge_template_is_the_servers();
// kvg.max_solution_tokens: the longest solution a library entry may hold.
int max_solution_tokens();
double transfer_min_similarity();
int transfer_max_entries();
// kvg.on_rejected_answer: what the scalar kvg_answer does with an answer its
// entry's verifier rejects.
enum class RejectedAnswer { Null, Error };
RejectedAnswer on_rejected_answer();

}  // namespace kvg::pg::settings
