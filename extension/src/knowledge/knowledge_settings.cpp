// Who may change what:
//  kvg.knowledge_template  any user: it only lays out the caller's own prompts
//                      (a chat model needs its own format); artifacts are
//                      content-addressed, so prompts of different templates
//                      are stored side by side and never mistaken for each
//                      other. Checked when set, so a broken template fails at
//                      SET rather than at the next answer.
//  kvg.max_solution_tokens
//                      superuser: the longest solution a library entry may
//                      hold, in tokens, so that nobody's entries crowd
//                      everybody's questions out of the context.
//  kvg.transfer_min_similarity, kvg.transfer_max_entries
//                      any user: how related an entry must be to be used as
//                      context for the caller's question, and how many.
#include "extension/src/knowledge/knowledge_settings.hpp"

#include <cstring>
#include <optional>
#include <string>

#include "engine/knowledge_prompt.hpp"
#include "extension/src/pg/setting_check.hpp"
#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "utils/guc_tables.h"
}

namespace kvg::pg::settings {

namespace {

// engine/knowledge_prompt.hpp: on a model with a chat template, this default
// is laid out in the model's chat format.
constexpr const char* kDefaultTemplate = kDefaultKnowledgeTemplate;

char* template_value = nullptr;
int max_solution_tokens_value = 1024;
double transfer_min_similarity_value = 0.5;
int transfer_max_entries_value = 2;
int on_rejected_answer_value = int(RejectedAnswer::Null);

const struct config_enum_entry rejected_answer_options[] = {
    {"null", int(RejectedAnswer::Null), false},
    {"error", int(RejectedAnswer::Error), false},
    {nullptr, 0, false},
};

std::optional<std::string> template_problem(const char* text) {
  KnowledgeTemplate::parse(text);  // throws what is wrong with it
  return std::nullopt;
}

bool check_template(char** newval, void**, GucSource) { return check_string_setting(newval, template_problem); }

}  // namespace

void define_knowledge() {
  DefineCustomStringVariable("kvg.knowledge_template",
                             "How a knowledge prompt is laid out: {solution}, then {question}, then the answer cue.",
                             "kvg_learn, kvg_solve and kvg_answer build every prompt from it.", &template_value,
                             kDefaultTemplate, PGC_USERSET, 0, check_template, nullptr, nullptr);
  DefineCustomIntVariable("kvg.max_solution_tokens", "The most tokens a library entry's solution may hold.",
                          "kvg_learn and kvg_solve refuse longer ones (54000).", &max_solution_tokens_value, 1024, 1,
                          INT_MAX, PGC_SUSET, 0, nullptr, nullptr, nullptr);
  DefineCustomRealVariable("kvg.transfer_min_similarity",
                           "Share of a question's words an entry must contain to serve as its context.", nullptr,
                           &transfer_min_similarity_value, 0.5, 0.0, 1.0, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("kvg.transfer_max_entries", "Most entries put before a question in transfer mode.", nullptr,
                          &transfer_max_entries_value, 2, 1, 16, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  // Any user: it decides only how the caller's own kvg_answer reports a
  // rejection; the audit row is written either way.
  DefineCustomEnumVariable("kvg.on_rejected_answer",
                           "What kvg_answer returns when the entry's verifier rejects the answer: null (with a "
                           "WARNING) or error (22V05).",
                           "kvg_answer_detail always returns the row, with verified = false.",
                           &on_rejected_answer_value, int(RejectedAnswer::Null), rejected_answer_options, PGC_USERSET,
                           0, nullptr, nullptr, nullptr);
}

const char* knowledge_template() { return template_value ? template_value : kDefaultTemplate; }

bool knowledge_template_is_the_servers() {
  config_generic** variables = get_guc_variables();
  for (int i = 0, n = GetNumConfigOptions(); i < n; ++i)
    if (std::strcmp(variables[i]->name, "kvg.knowledge_template") == 0) return variables[i]->source <= PGC_S_GLOBAL;
  return false;
}
int max_solution_tokens() { return max_solution_tokens_value; }
double transfer_min_similarity() { return transfer_min_similarity_value; }
int transfer_max_entries() { return transfer_max_entries_value; }
RejectedAnswer on_rejected_answer() { return RejectedAnswer(on_rejected_answer_value); }

}  // namespace kvg::pg::settings
