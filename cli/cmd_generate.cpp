#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>

#include "cli/args.hpp"
#include "cli/artifact_flags.hpp"
#include "cli/chat_flags.hpp"
#include "cli/clock.hpp"
#include "cli/commands.hpp"
#include "cli/engine_flags.hpp"
#include "common/error.hpp"
#include "engine/generate.hpp"
#include "engine/output_text.hpp"
#include "engine/positional_compose.hpp"
#include "engine/request_limits.hpp"
#include "storage/sha256.hpp"

namespace kvg::cli {

namespace {

// -n, --temperature, --top-k, --top-p, --seed: refused by the rule the SQL
// functions apply to their arguments (engine/request_limits.hpp), so that
// NaN, inf or -1 fail here as there, never run greedy or unbounded.
void set_sampling_flags(const Args& args, GenerateOptions& options) {
  options.max_new_tokens = args.get_int("n", 64);
  check_new_tokens(options.max_new_tokens, "-n");
  const double temperature = args.get_double("temperature", 0.0);
  check_temperature(temperature, "--temperature");
  const int64_t top_k = args.get_int("top-k", 0);
  check_top_k(top_k, "--top-k");
  const double top_p = args.get_double("top-p", 1.0);
  check_top_p(top_p, "--top-p");
  options.sampling.temperature = float(temperature);
  options.sampling.top_k = int(top_k);
  options.sampling.top_p = float(top_p);
  // Any 64-bit integer, as SQL's bigint seed: a negative one is its bits.
  options.sampling.seed = uint64_t(args.get_int("seed", 0));
}

// One line of the timings: "prompt eval time = 1.23 ms / 4 tokens (0.31 ms
// per token, 3252.03 tokens per second)", aligned as llama.cpp aligns them.
void print_timing(const char* what, double seconds, int64_t count, const char* unit) {
  const double ms = seconds * 1e3;
  std::fprintf(stderr, "kvg: %11s time = %10.2f ms / %5lld %s (%8.2f ms per token, %8.2f tokens per second)\n", what,
               ms, (long long)count, unit, count > 0 ? ms / double(count) : 0.0,
               seconds > 0 ? double(count) / seconds : 0.0);
}

// The timings llama.cpp prints at the end, on stderr so that stdout stays the
// text (or the JSON). Eval counts decode passes ("runs", as llama.cpp): the
// first token comes from the prompt's last pass, so n tokens take n - 1.
// Total is the whole command, the model's load included, as llama.cpp's.
void print_timings(const GenerateResult& result, int64_t prefilled, double total_seconds) {
  const int64_t runs = std::max<int64_t>(0, int64_t(result.tokens.size()) - 1);
  print_timing("prompt eval", result.prefill_seconds, prefilled, "tokens");
  print_timing("eval", result.decode_seconds, runs, "runs  ");
  std::fprintf(stderr, "kvg: %11s time = %10.2f ms / %5lld tokens\n", "total", total_seconds * 1e3,
               (long long)(prefilled + runs));
}

}  // namespace

int cmd_generate(const Args& args) { return run_generate(args, args.has("chat")); }

int run_generate(const Args& args, bool chat) {
  const double began = now_seconds();
  auto model = load_model(args);
  Session session(model, engine_options(args));
  std::vector<int32_t> prompt;
  std::vector<int32_t> stop_tokens;
  std::string format;
  // --compose-positional: cheap and NOT exact (engine/positional_compose.hpp).
  const bool positional = args.has("compose-positional");
  if (positional && args.has("artifact"))
    throw Error(ErrorCode::InvalidArgument, "give --artifact (an exact graft) or --compose-positional, not both");
  if (chat) {
    if (args.has("artifact") || args.has("tokens") || positional)
      throw Error(ErrorCode::InvalidArgument,
                  "a chat is laid out from messages: --artifact, --tokens and --compose-positional do not apply");
    ChatPrompt p = chat_prompt_from_flags(args, *model);
    prompt = std::move(p.tokens);
    stop_tokens = std::move(p.stop_tokens);
    format = chat_format_name(p.style.format);
  } else if (positional) {
    std::vector<int32_t> composed;
    const PositionalComposition c = graft_positional_flag(args, session);
    composed.assign(session.tokens().begin(), session.tokens().end());
    prompt = prompt_after_artifact(args, *model, composed);
    for (size_t i = 0; i < composed.size(); ++i)
      if (i >= prompt.size() || prompt[i] != composed[i])
        throw Error(ErrorCode::TokenMismatch, "--tokens must begin with the composed blocks' tokens");
    std::fprintf(stderr, "kvg: positional composition of %zu blocks (%lld tokens): NOT exact\n", c.blocks.size(),
                 (long long)c.n_tokens);
  } else if (args.has("artifact")) {
    const ArtifactRef ref = resolve_artifact(args);
    prompt = prompt_after_artifact(args, *model, chain_tokens(ref));
    graft(session, ref.id, ref.open, prompt);
  } else {
    prompt = prompt_tokens(args, *model);
  }
  GenerateOptions options;
  options.stop_tokens = stop_tokens;
  options.prefill_chunk = args.get_int("chunk", 0, 0, kMaxNewTokens);
  set_sampling_flags(args, options);
  const bool json = args.has("json");
  const Tokenizer& tok = model->tokenizer();
  int32_t previous = prompt.empty() ? -1 : prompt.back();
  // Printed text is always valid UTF-8: a character split across tokens is
  // held back until it completes, invalid bytes print as U+FFFD
  // (docs/output-bytes.md); --json gives the raw bytes as well.
  OutputTextStream text;
  if (!json) {
    options.on_token = [&](int32_t token) {
      const bool ends_turn = tok.is_end_of_generation(token) ||
                             std::find(stop_tokens.begin(), stop_tokens.end(), token) != stop_tokens.end();
      if (chat && ends_turn) return true;  // not part of the assistant's text
      std::fputs(text.feed(tok.decode_piece(token, previous)).c_str(), stdout);
      std::fflush(stdout);
      previous = token;
      return true;
    };
  }
  const auto rest = std::span<const int32_t>(prompt).subspan(size_t(session.n_past()));
  // Counted as SQL counts them (docs/sql.md): the last prompt token is always
  // computed again for its logits, so a prompt an artifact covers entirely is
  // n - 1 grafted and 1 prefilled.
  const int64_t grafted =
      std::max<int64_t>(0, std::min(int64_t(prompt.size()) - int64_t(rest.size()), int64_t(prompt.size()) - 1));
  const GenerateResult result = generate(session, rest, options);
  const int64_t prefilled = int64_t(prompt.size()) - grafted;
  if (json) {
    // A chat's answer is the assistant's text: the token that ended its turn is not part of it.
    std::vector<int32_t> answer = result.tokens;
    if (chat && result.stopped_at_eos) answer.pop_back();
    const std::string bytes = tok.decode(answer);
    if (chat) std::printf("{\"format\":\"%s\",", format.c_str());
    std::printf("%s\"prompt_tokens\":[%s],\"tokens\":[%s],\"text\":\"%s\",\"bytes_hex\":\"%s\",\"stopped_at_eos\":%s,"
                "\"grafted_tokens\":%lld,\"prefilled_tokens\":%lld,\"prefill_seconds\":%.6f,\"decode_seconds\":%.6f,"
                "\"exact\":%s}\n",
                chat ? "" : "{", join_tokens(prompt, ",").c_str(), join_tokens(result.tokens, ",").c_str(),
                json_escape(output_text(bytes)).c_str(), to_hex(bytes).c_str(), result.stopped_at_eos ? "true" : "false",
                (long long)grafted, (long long)prefilled, result.prefill_seconds,
                result.decode_seconds, positional ? "false" : "true");
  } else {
    std::printf("%s\n", text.finish().c_str());
  }
  std::fflush(stdout);  // the text before the timings where both go to one terminal or file
  if (!args.has("no-perf")) print_timings(result, prefilled, now_seconds() - began);
  return 0;
}

}  // namespace kvg::cli
