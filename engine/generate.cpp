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

GenerateResult generate(Session& session, std::span<const int32_t> prompt, const GenerateOptions& options) {
  if (session.n_past() == 0 && prompt.empty())
    throw Error(ErrorCode::InvalidArgument, "generate needs at least one prompt token");
  GenerateResult result;
  std::vector<float> logits;
  auto start = std::chrono::steady_clock::now();
  if (prompt.empty()) {
    // Everything is already in the cache (a whole-prompt graft): re-evaluate
    // the last token to get its logits, exactly as a fresh run computes them.
    const int32_t last = session.tokens().back();
    session.truncate(session.n_past() - 1);
    const int32_t one[1] = {last};
    session.forward(one, LogitsFor::Last, &logits);
  } else {
    session.prefill(prompt, options.prefill_chunk, LogitsFor::Last, &logits, options.check, options.prefill_report);
  }
  result.prefill_seconds = seconds_since(start);
  start = std::chrono::steady_clock::now();
  const int n_vocab = session.model().config().n_vocab;
  for (int64_t i = 0; i < options.max_new_tokens; ++i) {
    const int32_t token = sample_token(std::span<const float>(logits.data(), size_t(n_vocab)), options.sampling,
                                       session.n_past());
    result.tokens.push_back(token);
    if (options.decode_report) options.decode_report(i + 1, options.max_new_tokens);
    const bool more = options.on_token ? options.on_token(token) : true;
    const std::vector<int32_t>& stops = options.stop_tokens;
    const bool end = session.model().tokenizer().is_end_of_generation(token) ||
                     std::find(stops.begin(), stops.end(), token) != stops.end();
    if (options.stop_at_eos && end) {
      result.stopped_at_eos = true;
      break;
    }
    if (!more || i + 1 == options.max_new_tokens || session.n_past() >= session.max_context()) break;
    if (options.check) options.check();
    const int32_t one[1] = {token};
    session.forward(one, LogitsFor::Last, &logits);
  }
  result.decode_seconds = seconds_since(start);
  return result;
}

}  // namespace kvg
