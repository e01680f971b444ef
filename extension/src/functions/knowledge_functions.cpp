// SQL functions that fill the library: kvg_learn deposits a verified entry,
// kvg_solve has the model solve a question from scratch and deposits the
// first attempt its verifier accepts (docs/flywheel.md).
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/answer_line.hpp"
#include "engine/generate.hpp"
#include "engine/knowledge_prompt.hpp"
#include "engine/output_text.hpp"
#include "extension/src/calls/engine_call.hpp"
#include "extension/src/runs/generation_run.hpp"
#include "extension/src/knowledge/knowledge_deposit.hpp"
#include "extension/src/roles/owner_rights.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/calls/prefix_reuse.hpp"
#include "extension/src/knowledge/knowledge_settings.hpp"
#include "extension/src/spi/sql_values.hpp"
#include "extension/src/workers/engine/engine_worker.hpp"
#include "extension/src/roles/standby.hpp"
#include "extension/src/pg/postgres.hpp"

using namespace kvg;
using namespace kvg::pg;

namespace {

// Attempts after the first sample at this temperature, seeded by attempt
// number, so a solve is reproducible.
constexpr float kRetryTemperature = 0.8f;
constexpr int32 kMaxAttempts = 100;

std::string trimmed(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t\n\r\v\f");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\n\r\v\f") - begin + 1);
}

// The attempts of a solve, each decoded after the question's prompt. In a
// backend the prompt is computed once (all but its last token) and every
// attempt evaluates that token again and decodes. In the engine worker each
// attempt is a generation of its own, grafting the stored chain that begins
// the prompt when there is one: a retry computes the rest of the prompt
// again (retries follow only a greedy attempt its verifier refused).
class SolveAttempts {
 public:
  struct Attempt {
    GenerateResult result;
    Grafted grafted;                  // what this attempt grafted (a backend's later attempts: nothing)
    std::optional<int64_t> graft_us;  // when it grafted
    int64_t prefill_us = 0;           // its share of computing the prompt
  };

  SolveAttempts(EngineCall& call, std::span<const int32_t> prompt) : call_(call), prompt_(prompt) {
    if (engine_worker::in_use()) return;
    const int64_t n = int64_t(prompt.size());
    session_ = std::make_unique<Session>(call.model, call.options);
    grafted_ = graft_stored_prefix(call, *session_, prompt);
    const auto began = std::chrono::steady_clock::now();
    if (session_->n_past() < n - 1)
      session_->prefill(prompt.subspan(size_t(session_->n_past()), size_t(n - 1 - session_->n_past())), kPrefillChunk,
                        LogitsFor::None, nullptr, kCheckInterrupts);
    shared_prefill_us_ = micros_since(began);
  }

  Attempt run(bool first, const GenerateOptions& options) {
    if (!session_) {
      const GenerationRun run = run_generation(call_, prompt_, {}, options);
      return {run.result, run.grafted, run.grafted.micros, to_micros(run.result.prefill_seconds)};
    }
    const size_t last = prompt_.size() - 1;
    session_->truncate(int64_t(last));
    const GenerateResult r = generate(*session_, prompt_.subspan(last), options);
    // The prompt computed once counts for the first attempt.
    if (first) return {r, grafted_, grafted_.micros, to_micros(r.prefill_seconds) + shared_prefill_us_};
    return {r, Grafted{std::nullopt, 0, 0, grafted_.proven}, std::nullopt, to_micros(r.prefill_seconds)};
  }

 private:
  EngineCall& call_;
  std::span<const int32_t> prompt_;
  std::unique_ptr<Session> session_;  // a backend's, holding the prompt
  Grafted grafted_;
  int64_t shared_prefill_us_ = 0;
};

}  // namespace

// kvg_learn(question text, verifier text, solution text, answer text,
// solve_tokens bigint default null) returns bigint. NULL when the question,
// verifier, solution or answer is NULL or blank (docs/sql.md).
KVG_SQL_FUNCTION(kvg_learn) {
  for (int n = 0; n < 4; ++n)
    if (arg_is_blank(fcinfo, n)) PG_RETURN_NULL();
  refuse_on_standby("kvg_learn", "it adds an entry to the library and stores its artifact");
  EngineCall call;
  // Each part ends up in one prompt: none may be longer than the context holds.
  Deposit entry;
  entry.question = prompt_text_arg(fcinfo, 0, *call.model, "question");
  entry.solution = prompt_text_arg(fcinfo, 2, *call.model, "solution");
  entry.answer = prompt_text_arg(fcinfo, 3, *call.model, "answer");
  if (!arg_is_null(fcinfo, 4)) entry.solve_tokens = PG_GETARG_INT64(4);
  entry.verifier = parse_verifier(call.spi, prompt_text_arg(fcinfo, 1, *call.model, "verifier"));
  KnowledgeLibrary library(call.spi);
  PG_RETURN_INT64(deposit(call, library, entry));
}

// kvg_solve(question text, verifier text, max_tokens int default 32, attempts
// int default 3) returns table(attempt, answer, verified, tokens_decoded,
// solve_tokens, decode_ms, knowledge_id, audit_id): the cold prompt is
// computed once; each attempt decodes up to max_tokens tokens after it
// (greedy first, then sampled), its first line is the answer, the whole
// output the solution. solve_tokens counts the prompt once plus every token
// decoded so far: what the first verified attempt cost. No row for a NULL or
// blank question or verifier, or a NULL max_tokens or attempts (docs/sql.md).
KVG_SQL_FUNCTION(kvg_solve) {
  if (arg_is_blank(fcinfo, 0) || arg_is_blank(fcinfo, 1) || arg_is_null(fcinfo, 2) || arg_is_null(fcinfo, 3)) {
    return_rows(fcinfo, {});
    return Datum(0);
  }
  refuse_on_standby("kvg_solve", "it adds what it solves to the library");
  const int32 max_tokens = PG_GETARG_INT32(2);
  const int32 attempts = PG_GETARG_INT32(3);
  check_max_tokens(max_tokens);
  if (attempts < 1 || attempts > kMaxAttempts)
    throw Error(ErrorCode::InvalidArgument, "attempts must be in 1.." + std::to_string(kMaxAttempts));

  EngineCall call;
  require_depositor(call.spi);  // before any work: what it solves goes to the shared library
  const std::string question = prompt_text_arg(fcinfo, 0, *call.model, "question");
  const Verifier verifier = parse_verifier(call.spi, prompt_text_arg(fcinfo, 1, *call.model, "verifier"));
  if (verifier.kind == Verifier::Kind::Contains)
    throw Error(ErrorCode::InvalidArgument,
                "kvg_solve needs a verifier that knows a right answer (exact:, regex: or a function); contains "
                "checks a given solution against a given answer");
  KnowledgeLibrary library(call.spi);
  (void)library.question_key(question);  // refuses a question that normalizes to nothing, before any work

  const KnowledgeTemplate tmpl = knowledge_template_for(*call.model, settings::knowledge_template());
  const SegmentedPrompt prompt =
      tokenize_segments(*call.model, knowledge_segments(tmpl, {}, question), kCheckInterrupts, tmpl.markers);
  const int64_t n = int64_t(prompt.tokens.size());
  SolveAttempts solving(call, prompt.tokens);

  std::vector<std::vector<ResultValue>> rows;
  int64_t cost = n;
  for (int32 attempt = 1; attempt <= attempts; ++attempt) {
    GenerateOptions options;
    options.max_new_tokens = max_tokens;
    options.sampling.temperature = attempt == 1 ? 0.0f : kRetryTemperature;
    options.sampling.seed = uint64_t(attempt);
    options.prefill_chunk = kPrefillChunk;
    options.check = kCheckInterrupts;
    options.stop_tokens = tmpl.stop_tokens;  // the chat format's end marker ends the attempt
    const SolveAttempts::Attempt a = solving.run(attempt == 1, options);
    const GenerateResult& r = a.result;
    // Audited as produced; checked, deposited and returned as text
    // (invalid bytes as U+FFFD: docs/output-bytes.md).
    const std::string output = call.model->tokenizer().decode(r.tokens);
    const std::string answer = output_text(first_line(output));
    cost += int64_t(r.tokens.size());
    const bool ok = !answer.empty() && check(call.spi, verifier,
                                             question, answer, std::nullopt)
                                           .passed;

    AuditRecord audit = call.audit("solve");
    audit.input_sha256 = text_sha256(question);
    audit.set_output(output);
    audit.verified = ok;
    audit.tokens_in = int32_t(n);
    audit.tokens_out = int32_t(r.tokens.size());
    audit.tokens_grafted = int32_t(grafted_tokens_used(a.grafted, n));
    audit.graft_us = a.graft_us;
    audit.prefill_us = a.prefill_us;
    audit.decode_us = to_micros(r.decode_seconds);
    audit.kv_proven = a.grafted.proven;
    const std::optional<int64_t> audit_id = audit_append(call.spi, audit);

    std::optional<int64_t> knowledge_id;
    if (ok) {
      knowledge_id = deposit_new(call, library, Deposit{question, output_text(trimmed(output)), answer, verifier, cost});
      if (!knowledge_id) notice("the question is already in the library: kvg_solve deposited nothing");
    }
    rows.push_back({Int32GetDatum(attempt), text_result(answer), BoolGetDatum(ok),
                    Int32GetDatum(int32(r.tokens.size())), Int64GetDatum(cost),
                    Float8GetDatum(double(to_micros(r.prefill_seconds) + *audit.decode_us) / 1000),
                    knowledge_id ? ResultValue(Int64GetDatum(*knowledge_id)) : std::nullopt,
                    audit_id ? ResultValue(Int64GetDatum(*audit_id)) : std::nullopt});
    if (ok) break;
  }
  return_rows(fcinfo, rows);
  return Datum(0);
}
