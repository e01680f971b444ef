#include "engine/generate.hpp"

#include <algorithm>
#include <chrono>

#include "common/error.hpp"

namespace kvg {

namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

Generation::Generation(Session& session, std::span<const int32_t> prompt, GenerateOptions options)
    : session_(session), options_(std::move(options)), prompt_(prompt.begin(), prompt.end()) {
  if (session_.n_past() == 0 && prompt_.empty())
    throw Error(ErrorCode::InvalidArgument, "generate needs at least one prompt token");
  if (prompt_.empty()) {
    // Everything is already in the cache (a whole-prompt graft): evaluate
    // the last token again for its logits, exactly as a fresh run computes them.
    prompt_.push_back(session_.tokens().back());
    session_.truncate(session_.n_past() - 1);
  }
  session_.check_tokens(prompt_);
  if (options_.continuations < 1) throw Error(ErrorCode::InvalidArgument, "a generation decodes at least one continuation");
  if (options_.continuations > 1 && (options_.stop_at_eos || !options_.stop_tokens.empty() || options_.on_token))
    throw Error(ErrorCode::InvalidArgument,
                "continuations of a prompt are all max_new_tokens long: a generation of several stops at no token");
  if (options_.prompt_logits_from >= 0 && !options_.prompt_logits)
    throw Error(ErrorCode::Internal, "a generation asked for prompt logits has nowhere to hand them");
  if (options_.prefill_report) options_.prefill_report(0, prompt_tokens());
}

bool Generation::wants_rows(int64_t at, size_t n) const {
  return options_.prompt_logits_from >= 0 && at + int64_t(n) > options_.prompt_logits_from;
}

ForwardRequest Generation::next() {
  if (finished_) throw Error(ErrorCode::Internal, "a finished generation has no next pass");
  if (evaluated_ < prompt_.size()) {
    const size_t left = prompt_.size() - evaluated_;
    chunk_ = options_.prefill_chunk > 0 ? std::min(left, size_t(options_.prefill_chunk)) : left;
    if (chunk_cap_ > 0) chunk_ = std::min(chunk_, size_t(chunk_cap_));
    // A generation that decodes nothing (a capture) needs no logits at all.
    const bool samples_after = chunk_ == left && options_.max_new_tokens > 0;
    const LogitsFor which = wants_rows(session_.n_past(), chunk_) ? LogitsFor::All
                            : samples_after                      ? LogitsFor::Last
                                                                 : LogitsFor::None;
    return {&session_, std::span<const int32_t>(prompt_).subspan(evaluated_, chunk_), which, &logits_};
  }
  chunk_ = 0;
  return {&session_, std::span<const int32_t>(&last_, 1), LogitsFor::Last, &logits_};
}

void Generation::advance() {
  if (evaluated_ < prompt_.size()) {
    evaluated_ += chunk_;
    const int64_t at = session_.n_past() - int64_t(chunk_);  // the chunk's first position
    const size_t n_vocab = size_t(session_.model().config().n_vocab);
    if (wants_rows(at, chunk_)) {
      if (logits_.size() != chunk_ * n_vocab) throw Error(ErrorCode::Internal, "a prefill pass gave too few logits rows");
      const size_t skip = size_t(std::max<int64_t>(options_.prompt_logits_from - at, 0));
      options_.prompt_logits(std::span<const float>(logits_).subspan(skip * n_vocab));
      logits_.erase(logits_.begin(), logits_.end() - std::ptrdiff_t(n_vocab));  // the last row samples
    }
    if (options_.prefill_report) options_.prefill_report(int64_t(evaluated_), prompt_tokens());
    if (evaluated_ < prompt_.size()) return;
    result_.prefill_seconds = seconds_since(phase_began_);
    phase_began_ = std::chrono::steady_clock::now();
    if (options_.max_new_tokens <= 0) return finish();
    if (options_.continuations > 1) {
      prompt_end_ = session_.n_past();
      prompt_last_ = logits_;
    }
  }
  sample();
}

void Generation::sample() {
  const int n_vocab = session_.model().config().n_vocab;
  for (;;) {
    if (logits_.size() != size_t(n_vocab)) throw Error(ErrorCode::Internal, "a generation's pass gave no logits row");
    SamplingParams sampling = options_.sampling;
    sampling.seed += uint64_t(continuation_);
    const int32_t token = sample_token(logits_, sampling, session_.n_past());
    result_.tokens.push_back(token);
    const int64_t made = int64_t(result_.tokens.size());
    if (options_.decode_report) options_.decode_report(made, options_.max_new_tokens * options_.continuations);
    const bool more = options_.on_token ? options_.on_token(token) : true;
    const std::vector<int32_t>& stops = options_.stop_tokens;
    const bool end = session_.model().tokenizer().is_end_of_generation(token) ||
                     std::find(stops.begin(), stops.end(), token) != stops.end();
    if (options_.stop_at_eos && end) {
      result_.stopped_at_eos = true;
      return finish();
    }
    const int64_t made_here = made - int64_t(continuation_began_);
    if (more && made_here < options_.max_new_tokens && session_.n_past() < session_.max_context()) {
      last_ = token;
      return;
    }
    // This continuation is complete: the next one samples from the prompt's end.
    if (++continuation_ >= options_.continuations) return finish();
    session_.truncate(prompt_end_);
    logits_ = prompt_last_;
    continuation_began_ = result_.tokens.size();
  }
}

void Generation::finish() {
  finished_ = true;
  result_.decode_seconds = evaluated_ < prompt_.size() ? 0 : seconds_since(phase_began_);
}

GenerateResult generate(Session& session, std::span<const int32_t> prompt, const GenerateOptions& options) {
  Generation generation(session, prompt, options);
  while (!generation.finished()) {
    if (options.check) options.check();
    const ForwardRequest part = generation.next();
    session.forward(part.tokens, part.which, part.logits);
    generation.advance();
  }
  return generation.result();
}

void step_together(std::span<Generation* const> generations) {
  std::vector<ForwardRequest> parts;
  std::vector<Generation*> running;
  for (Generation* g : generations)
    if (!g->finished()) {
      parts.push_back(g->next());
      running.push_back(g);
    }
  if (parts.empty()) return;
  Session::forward_batch(parts);
  for (Generation* g : running) g->advance();
}

}  // namespace kvg
