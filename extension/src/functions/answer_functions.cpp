// kvg_answer_detail and kvg_answer (its answer, or NULL when the verifier
// rejects it): route the
// question (knowledge_route.hpp), build its prompt from the template, graft
// the longest stored chain that begins it, decode one line of answer, check a
// recurring answer with its entry's verifier, store what a transfer or a
// re-templated recurring prompt computed as chain links, audit the call.
#include <string>

#include "common/error.hpp"
#include "engine/answer_line.hpp"
#include "engine/generate.hpp"
#include "engine/knowledge_prompt.hpp"
#include "engine/output_text.hpp"
#include "engine/prompt.hpp"
#include "extension/src/calls/engine_call.hpp"
#include "extension/src/runs/generation_run.hpp"
#include "extension/src/knowledge/knowledge_route.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/pg/sql_raise.hpp"
#include "extension/src/calls/prefix_reuse.hpp"
#include "extension/src/knowledge/knowledge_settings.hpp"
#include "extension/src/model/model_settings.hpp"
#include "extension/src/spi/sql_values.hpp"
#include "extension/src/roles/standby.hpp"
#include "extension/src/knowledge/verifier.hpp"
#include "extension/src/pg/postgres.hpp"

using namespace kvg;
using namespace kvg::pg;

namespace {

ResultValue optional_text(const std::optional<std::string>& s) {
  return s ? ResultValue(text_result(*s)) : std::nullopt;
}

// The route's prompt. Transfer context that does not fit the model's
// context with the question is left out, least related entry first, down to
// none (cold): no library entry can make a question fail that would be
// answered without it (docs/security.md).
SegmentedPrompt lay_out_fitting(const Model& model, const KnowledgeTemplate& tmpl, Route& route) {
  for (;;) {
    try {
      return tokenize_segments(model, knowledge_segments(tmpl, route.contexts(), route.question), kCheckInterrupts,
                               tmpl.markers);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::OutOfRange || route.entries.empty() || route.mode != Route::Mode::Transfer) throw;
      route.entries.erase(route.entries.begin());
      if (route.entries.empty()) route.mode = Route::Mode::Cold;
    }
  }
}

// What one answer call made: the answer, whether its entry's verifier
// accepted it (nullopt: no verifier applies, a transfer or cold answer), and
// kvg_answer_detail's row.
struct Answered {
  std::string answer;
  std::optional<bool> verified;
  std::optional<int64_t> knowledge_id;
  std::optional<int64_t> audit_id;
  std::vector<ResultValue> row;
};

// One question routed and laid out, ready to generate.
struct PreparedAnswer {
  std::string question;
  Route route;
  SegmentedPrompt prompt;
  GenerationAsks asks;
};

// The options of every answer of a call: the template's stop tokens, the
// decode budget, progress notices.
GenerateOptions answer_options(const KnowledgeTemplate& tmpl, int32 max_tokens) {
  GenerateOptions options;
  options.max_new_tokens = max_tokens;
  options.prefill_chunk = kPrefillChunk;
  options.check = kCheckInterrupts;
  options.stop_tokens = tmpl.stop_tokens;  // the chat format's end marker ends the answer
  options.prefill_report = progress_notices("answer: prefilled");
  options.decode_report = progress_notices("answer: decoded");
  return options;
}

PreparedAnswer prepare_answer(EngineCall& call, KnowledgeLibrary& library, const KnowledgeTemplate& tmpl,
                              std::string question) {
  PreparedAnswer a{std::move(question), {}, {}, {}};
  a.route = route_question(library, a.question);
  a.prompt = lay_out_fitting(*call.model, tmpl, a.route);
  // Compositions with knowledge are stored so the next call grafts them; a
  // cold question's prompt is not (it would store every question ever asked).
  // A standby cannot store: the primary stores them when it answers.
  a.asks.answer_line = true;
  if (a.route.mode != Route::Mode::Cold && settings::prefix_reuse() && !on_standby()) a.asks.link_ends = a.prompt.ends;
  return a;
}

// What a generation made of a prepared question: the answer checked by the
// entry's verifier, the links stored, the call audited.
// decode_ms is everything after the graft: the prefill of what was not
// grafted and the decoding.
Answered finish_answer(EngineCall& call, const PreparedAnswer& a, const GenerationRun& run,
                       const GenerateOptions& options) {
  const Route& route = a.route;
  const Grafted& grafted = run.grafted;
  const GenerateResult& r = run.result;
  const int64_t n = int64_t(a.prompt.tokens.size());
  AnswerLine line(call.model->tokenizer(), a.prompt.tokens.back());
  for (const int32_t token : r.tokens) line.feed(token);
  // The line as the model produced it (audited byte for byte) and as text
  // (what is checked and returned): docs/output-bytes.md.
  const std::string raw_answer = line.answer();
  Answered made;
  made.answer = output_text(raw_answer);
  made.knowledge_id = route.knowledge_id();
  // The entries' links are the library's to pay for, laid out by the
  // server's template; the question's, the asker's (docs/security.md,
  // promise 7). A user's own template makes them all the asker's.
  const bool library_pays = a.prompt.ends.size() >= 2 && settings::knowledge_template_is_the_servers();
  run.store_links(call, library_pays ? a.prompt.ends[a.prompt.ends.size() - 2] : 0);

  if (route.mode == Route::Mode::Recurring) {
    const KnowledgeEntry& entry = route.entries.front();
    const Verdict verdict = check(call.spi, StoredVerifier{entry.verifier, entry.verifier_pin, entry.verifier_frozen},
                                  entry.question, made.answer, entry.answer);
    // A verifier that may not run fails closed: the answer is unverified, and why is said.
    if (verdict.refusal) warning("knowledge entry " + std::to_string(entry.id) + ": " + *verdict.refusal);
    made.verified = verdict.passed;
  }

  const int64_t grafted_used = grafted_tokens_used(grafted, n);
  AuditRecord audit = call.audit("answer");
  audit.input_sha256 = text_sha256(a.question);
  audit.set_output(raw_answer);
  audit.mode = route.mode_name();
  audit.knowledge_id = made.knowledge_id;
  audit.verified = made.verified;
  audit_generation(audit, call, grafted, a.prompt.tokens, options, r);
  // The prompt was laid out from this template (and the model's chat format).
  audit.template_text = settings::knowledge_template();
  audit.template_sha256 = text_sha256(*audit.template_text);
  made.audit_id = audit_append(call.spi, audit);

  made.row = {text_result(made.answer), text_result(route.mode_name()),
              made.verified ? ResultValue(BoolGetDatum(*made.verified)) : std::nullopt,
              made.knowledge_id ? ResultValue(Int64GetDatum(*made.knowledge_id)) : std::nullopt,
              optional_text(grafted.leaf ? std::optional<std::string>(to_hex(*grafted.leaf)) : std::nullopt),
              Int32GetDatum(int32(grafted_used)), Int32GetDatum(int32(n - grafted_used)),
              Int32GetDatum(int32(r.tokens.size())), Float8GetDatum(double(grafted.micros) / 1000),
              Float8GetDatum(double(*audit.prefill_us + *audit.decode_us) / 1000),
              made.audit_id ? ResultValue(Int64GetDatum(*made.audit_id)) : std::nullopt};
  return made;
}

// Answers the question argument (non-blank) and audits the call.
Answered answer_question(FunctionCallInfo fcinfo, int32 max_tokens) {
  check_max_tokens(max_tokens);
  EngineCall call;
  KnowledgeLibrary library(call.spi);
  const KnowledgeTemplate tmpl = knowledge_template_for(*call.model, settings::knowledge_template());
  const PreparedAnswer a = prepare_answer(call, library, tmpl, prompt_text_arg(fcinfo, 0, *call.model, "question"));
  const GenerateOptions options = answer_options(tmpl, max_tokens);
  // In this backend or in the engine worker (kvg.engine): the same tokens.
  const GenerationRun run = run_generation(call, a.prompt.tokens, {}, options, a.asks);
  return finish_answer(call, a, run, options);
}

// The most questions one kvg_answers call takes: a bound on its work (and on
// its sessions' KV, which kvg.max_kv_memory bounds together) before it starts.
constexpr size_t kMaxQuestions = 256;

// Which entry rejected the answer, and the call's audit row (which holds the
// rejected answer): in the DETAIL, so the message itself is the same every time.
std::string rejection_detail(const Answered& made) {
  return "knowledge entry " + std::to_string(*made.knowledge_id) +
         (made.audit_id ? ", audit row " + std::to_string(*made.audit_id) : ", not audited");
}

}  // namespace

// kvg_answer_detail(question text, max_tokens int default 32) returns
// table(answer, mode, verified, knowledge_id, artifact, tokens_grafted,
// tokens_prefilled, tokens_decoded, graft_ms, decode_ms, audit_id). On a
// hot standby audit_id is the row's id on the primary, and NULL only when
// kvg.allow_unaudited let an answer go without one. A NULL or blank
// question, or a NULL max_tokens, gives no row (docs/sql.md).
KVG_SQL_FUNCTION(kvg_answer_detail) {
  if (arg_is_blank(fcinfo, 0) || arg_is_null(fcinfo, 1)) {
    return_rows(fcinfo, {});
    return Datum(0);
  }
  return_rows(fcinfo, {answer_question(fcinfo, PG_GETARG_INT32(1)).row});
  return Datum(0);
}

// kvg_answer(question text, max_tokens int default 32) returns text: the
// answer, unless the entry's verifier rejects it. Then NULL with a WARNING,
// or an error (22V05) under kvg.on_rejected_answer = error: a scalar result
// has no column to say "unverified" in, and a caller who reads only it must
// not take a rejected answer for a verified one. A transfer or cold answer
// has no verifier and is returned (kvg_answer_detail's mode says which).
KVG_SQL_FUNCTION(kvg_answer) {
  if (arg_is_blank(fcinfo, 0) || arg_is_null(fcinfo, 1)) PG_RETURN_NULL();
  const Answered made = answer_question(fcinfo, PG_GETARG_INT32(1));
  if (made.verified.value_or(true)) return text_result(made.answer);
  const std::string hint = "kvg_answer_detail returns the rejected answer with verified = false.";
  if (settings::on_rejected_answer() == settings::RejectedAnswer::Error)
    raise_sqlstate("22V05", "the entry's verifier rejects the answer to this recurring question", hint,
                   rejection_detail(made));
  warning("kvg_answer returns NULL: the entry's verifier rejects the answer to this recurring question", hint,
          rejection_detail(made));
  PG_RETURN_NULL();
}

// kvg_answers(questions text[], max_tokens int default 32) returns
// table(n, question, answer, mode, ..., audit_id): every question of the
// array answered as kvg_answer_detail answers it alone, the same bytes, but
// generated together in this backend's shared batched passes (the weights
// read once per step for all of them), each verified and audited on its
// own. n is the question's position in the array; a NULL or blank question
// gives no row, and a NULL array or max_tokens none at all.
KVG_SQL_FUNCTION(kvg_answers) {
  if (arg_is_null(fcinfo, 0) || arg_is_null(fcinfo, 1)) {
    return_rows(fcinfo, {});
    return Datum(0);
  }
  const int32 max_tokens = PG_GETARG_INT32(1);
  check_max_tokens(max_tokens);
  const std::vector<std::optional<std::string>> questions = text_array_arg(fcinfo, 0, kMaxQuestions, "questions");
  EngineCall call;
  KnowledgeLibrary library(call.spi);
  const KnowledgeTemplate tmpl = knowledge_template_for(*call.model, settings::knowledge_template());
  std::vector<int32_t> positions;
  std::vector<PreparedAnswer> prepared;
  for (size_t i = 0; i < questions.size(); ++i) {
    if (!questions[i] || is_blank(*questions[i])) continue;
    check_prompt_bytes(*call.model, questions[i]->size(), "a question");
    positions.push_back(int32(i + 1));
    prepared.push_back(prepare_answer(call, library, tmpl, *questions[i]));
  }
  const GenerateOptions options = answer_options(tmpl, max_tokens);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<GenerationAsks> asks;
  for (const PreparedAnswer& a : prepared) {
    prompts.push_back(a.prompt.tokens);
    asks.push_back(a.asks);
  }
  const std::vector<GenerationRun> runs = run_generations_together(call, prompts, options, asks);
  std::vector<std::vector<ResultValue>> rows;
  for (size_t i = 0; i < prepared.size(); ++i) {
    std::vector<ResultValue> row = finish_answer(call, prepared[i], runs[i], options).row;
    row.insert(row.begin(), {Int32GetDatum(positions[i]), text_result(prepared[i].question)});
    rows.push_back(std::move(row));
  }
  return_rows(fcinfo, rows);
  return Datum(0);
}
