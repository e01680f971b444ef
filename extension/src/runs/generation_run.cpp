#include "extension/src/runs/generation_run.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "engine/answer_line.hpp"
#include "extension/src/runs/run_progress.hpp"
#include "extension/src/runs/worker_request.hpp"
#include "extension/src/workers/engine/engine_worker.hpp"

namespace kvg::pg {

namespace {

std::vector<int64_t> prompt_lengths(const std::vector<std::vector<int32_t>>& prompts) {
  std::vector<int64_t> lengths;
  for (const auto& p : prompts) lengths.push_back(int64_t(p.size()));
  return lengths;
}

// The chain a generation grafts: the longest stored one continuing `start`
// (prefix reuse), or `start` itself when asked so.
ChosenPrefix chosen_for(EngineCall& call, std::span<const int32_t> prompt, const StoredPrefix& start,
                        const GenerationAsks& asks) {
  return asks.graft_exactly ? exactly(call, start) : choose_stored_prefix(call, prompt, start);
}

GenerationRun in_this_backend(EngineCall& call, std::span<const int32_t> prompt, const StoredPrefix& start,
                              GenerateOptions options, const GenerationAsks& asks, std::unique_ptr<Session>& session) {
  RunProgress progress({int64_t(prompt.size())}, options.max_new_tokens, call_progress::Phase::Prefill,
                       std::move(options.prefill_report), std::move(options.decode_report));
  options.prefill_report = progress.prefill_report(0);
  options.decode_report = progress.decode_report(0);
  session = std::make_unique<Session>(call.model, call.options);
  GenerationRun run;
  run.grafted = graft_chosen(call, *session, prompt, chosen_for(call, prompt, start, asks));
  std::optional<AnswerLine> line;  // (an answer's prompt is never empty)
  if (asks.answer_line) {
    line.emplace(call.model->tokenizer(), prompt.back());
    options.on_token = [&line](int32_t token) { return line->feed(token); };
  }
  run.result = generate(*session, prompt.subspan(size_t(session->n_past())), options);
  return run;
}

// `request` with what `asks` asks of the worker.
engine_worker::GenerationRequest request_with(const GenerationAsks& asks, engine_worker::GenerationRequest request) {
  request.answer_line = asks.answer_line;
  request.capture_ends = asks.link_ends;
  return request;
}

// What the worker ran, as this backend's run would say it.
GenerationRun run_from(const ChosenPrefix& chosen, engine_worker::WorkerGeneration ran,
                       std::vector<std::vector<uint8_t>>& links) {
  GenerationRun run;
  run.grafted.proven = chosen.proven;
  run.grafted.leaf = chosen.chain.leaf;
  run.grafted.tokens = ran.done.grafted_tokens;
  run.grafted.micros = ran.done.graft_micros;
  run.result = std::move(ran.result);
  links = std::move(ran.links);
  return run;
}

GenerationRun in_the_worker(EngineCall& call, std::span<const int32_t> prompt, const StoredPrefix& start,
                            const GenerateOptions& options, const GenerationAsks& asks,
                            std::vector<std::vector<uint8_t>>& links) {
  const ChosenPrefix chosen = chosen_for(call, prompt, start, asks);
  const engine_worker::GenerationRequest request =
      request_with(asks, worker_request(call, prompt, chosen, options, call.options.max_kv_bytes, false));
  refuse_if_never_fits(*call.model, request);
  // The worker says when it takes the call and sends each token as it is
  // decoded: kvg.progress and the decode's progress notices follow them.
  RunProgress progress({int64_t(prompt.size())}, options.max_new_tokens, call_progress::Phase::Queued,
                       options.prefill_report, options.decode_report);
  return run_from(chosen, engine_worker::generate(request, supply_from(call.store), progress.for_worker()), links);
}

// run_generations_together's prompts handed to the worker as one call: its
// sequences share the worker's passes with each other and with every other
// caller's. Each gets its share of kvg.max_kv_memory, as in this backend.
std::vector<GenerationRun> together_in_the_worker(EngineCall& call, const std::vector<std::vector<int32_t>>& prompts,
                                                  const GenerateOptions& options,
                                                  const std::vector<GenerationAsks>& asks, int64_t share,
                                                  std::vector<std::vector<std::vector<uint8_t>>>& links) {
  const size_t n = prompts.size();
  std::vector<ChosenPrefix> chosen;
  std::vector<engine_worker::GenerationRequest> requests;
  for (size_t i = 0; i < n; ++i) {
    chosen.push_back(choose_stored_prefix(call, prompts[i], {}));
    requests.push_back(request_with(asks[i], worker_request(call, prompts[i], chosen[i], options, share, true)));
    refuse_if_never_fits(*call.model, requests.back());
  }
  RunProgress progress(prompt_lengths(prompts), options.max_new_tokens, call_progress::Phase::Queued);
  std::vector<engine_worker::WorkerGeneration> ran =
      engine_worker::generate_together(requests, supply_from(call.store), progress.for_worker());
  std::vector<GenerationRun> runs;
  links.resize(n);
  for (size_t i = 0; i < n; ++i) runs.push_back(run_from(chosen[i], std::move(ran[i]), links[i]));
  return runs;
}

}  // namespace

std::optional<Digest> GenerationRun::store_links(EngineCall& call, int64_t library_end) const {
  if (session_) return store_segment_links(call, *session_, grafted, link_ends_, library_end);
  return store_captured_links(call, grafted, links_, library_end);
}

std::optional<Digest> GenerationRun::links_leaf() const {
  if (session_) return segment_links_leaf(*session_, grafted, link_ends_);
  if (links_.empty()) return grafted.leaf;
  return sha256(std::span<const uint8_t>(links_.back()));
}

GenerationRun run_generation(EngineCall& call, std::span<const int32_t> prompt, const StoredPrefix& start,
                             const GenerateOptions& options, const GenerationAsks& asks) {
  std::unique_ptr<Session> session;
  std::vector<std::vector<uint8_t>> links;
  GenerationRun run = engine_worker::in_use() ? in_the_worker(call, prompt, start, options, asks, links)
                                              : in_this_backend(call, prompt, start, options, asks, session);
  run.link_ends_ = asks.link_ends;
  run.session_ = std::move(session);
  run.links_ = std::move(links);
  return run;
}

std::vector<GenerationRun> run_generations_together(EngineCall& call, const std::vector<std::vector<int32_t>>& prompts,
                                                    const GenerateOptions& options,
                                                    const std::vector<GenerationAsks>& asks) {
  if (options.on_token) throw Error(ErrorCode::Internal, "generations run together decide per token through asks");
  const size_t n = prompts.size();
  EngineOptions each = call.options;  // the call's KV bound, shared out
  if (each.max_kv_bytes > 0 && n > 0) {
    each.max_kv_bytes = std::max<int64_t>(1, each.max_kv_bytes / int64_t(n));
    each.kv_limit_name = worker_protocol::kKvShareLimitName;  // a literal: sessions outlive this
  }
  if (engine_worker::in_use()) {
    std::vector<std::vector<std::vector<uint8_t>>> links;
    std::vector<GenerationRun> runs = together_in_the_worker(call, prompts, options, asks, each.max_kv_bytes, links);
    for (size_t i = 0; i < n; ++i) {
      runs[i].link_ends_ = asks[i].link_ends;
      runs[i].links_ = std::move(links[i]);
    }
    return runs;
  }
  // They never run two passes at once: one pool of threads for all.
  each.pool = std::make_shared<ThreadPool>(std::max(1, each.threads));
  std::vector<GenerationRun> runs(n);
  std::vector<std::unique_ptr<Session>> sessions(n);
  std::vector<std::optional<AnswerLine>> lines(n);
  RunProgress progress(prompt_lengths(prompts), options.max_new_tokens, call_progress::Phase::Prefill);
  std::vector<std::unique_ptr<Generation>> generations;  // (they report to `progress`)
  for (size_t i = 0; i < n; ++i) {
    sessions[i] = std::make_unique<Session>(call.model, each);
    runs[i].grafted = graft_stored_prefix(call, *sessions[i], prompts[i]);
    GenerateOptions own = options;
    own.prefill_report = progress.prefill_report(i);
    own.decode_report = progress.decode_report(i);
    if (asks[i].answer_line) {
      lines[i].emplace(call.model->tokenizer(), prompts[i].back());
      own.on_token = [&line = lines[i]](int32_t token) { return line->feed(token); };
    }
    generations.push_back(std::make_unique<Generation>(
        *sessions[i], std::span<const int32_t>(prompts[i]).subspan(size_t(sessions[i]->n_past())), std::move(own)));
  }
  for (;;) {
    std::vector<Generation*> running;
    for (const auto& g : generations)
      if (!g->finished()) running.push_back(g.get());
    if (running.empty()) break;
    if (options.check) options.check();  // a cancel between passes
    step_together(running);
  }
  for (size_t i = 0; i < n; ++i) {
    runs[i].result = generations[i]->result();
    runs[i].link_ends_ = asks[i].link_ends;
    runs[i].session_ = std::move(sessions[i]);  // the generations that use it end with this function
  }
  return runs;
}

}  // namespace kvg::pg
