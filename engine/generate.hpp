// The decode loop shared by the CLI and the extension.
#pragma once

#include <algorithm>

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/sampler.hpp"
#include "engine/session.hpp"

namespace kvg {

struct GenerateOptions {
  int64_t max_new_tokens = 64;
  SamplingParams sampling;
  // Stop after EOS or a vocabulary's end-of-turn token
  // (Tokenizer::is_end_of_generation), or one of stop_tokens (a chat
  // format's end marker, engine/chat_prompt.hpp).
  bool stop_at_eos = true;
  std::vector<int32_t> stop_tokens;
  int64_t prefill_chunk = 0;  // 0: the whole prompt in one forward call
  // Called with each new token; return false to stop after it.
  std::function<bool(int32_t token)> on_token;
  ProgressCheck check;  // between prefill chunks and decode steps
  ProgressReport prefill_report;  // prompt tokens evaluated, of the prompt's
  ProgressReport decode_report;   // tokens decoded, of max_new_tokens × continuations
  // Continuations of the prompt to decode one after another, each from the
  // prompt's end (the session truncated back to it, its last logits row
  // kept) with seed sampling.seed + i: a graft check's samples
  // (engine/graft_check.hpp). result.tokens holds them all, in order, each
  // max_new_tokens long unless the context ends it first, the same length
  // for every one; so more than one is refused with a stop (stop_at_eos,
  // stop_tokens, on_token).
  int continuations = 1;
  // The logits rows of the prompt positions from this session position on
  // (negative: none), handed to prompt_logits as their prefill chunks are
  // evaluated, in order, n_vocab floats each: what a graft check compares.
  int64_t prompt_logits_from = -1;
  std::function<void(std::span<const float> rows)> prompt_logits;
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated tokens (an end token that stopped it included)
  bool stopped_at_eos = false;  // at EOS, an end-of-turn token or a stop token
  double prefill_seconds = 0;
  double decode_seconds = 0;
};

// One generation as a series of forward passes: prefill chunks, then one
// decode row per token. Split so that many generations can share each pass
// (step_together: the engine worker's continuous batching); generate() runs
// one alone. Either way a generation's tokens are the same bits, as every
// pass is (Session::forward_batch). The session must outlive it.
class Generation {
 public:
  // Evaluates `prompt` after what the session already holds (which may be a
  // graft), then decodes. Refuses bad tokens and a prompt that cannot fit
  // before any pass; the session must hold or receive at least one token.
  // `options.check` is the driver's to call (generate() calls it before each
  // pass).
  Generation(Session& session, std::span<const int32_t> prompt, GenerateOptions options);

  bool finished() const { return finished_; }
  // Prompt tokens not evaluated yet (0: it decodes).
  int64_t prefill_left() const { return int64_t(prompt_.size() - evaluated_); }
  // The most prompt tokens the next prefill chunks may take (0: as
  // options.prefill_chunk says), for a scheduler that shares a pass's
  // tokens out (the engine worker's): a chunk of any size is the same bits.
  void cap_chunk(int64_t tokens) { chunk_cap_ = std::max<int64_t>(tokens, 0); }
  // This generation's part of the next pass: a prefill chunk, or the token
  // decoded last. Only while not finished; valid until advance().
  ForwardRequest next();
  // After the pass that ran next(): the sampled token when its logits came,
  // and whether to go on.
  void advance();

  Session& session() const { return session_; }
  const GenerateResult& result() const { return result_; }
  int64_t prompt_tokens() const { return int64_t(prompt_.size()); }

 private:
  bool wants_rows(int64_t at, size_t n) const;
  void sample();
  void finish();

  Session& session_;
  GenerateOptions options_;
  std::vector<int32_t> prompt_;  // still to evaluate from `evaluated_`
  size_t evaluated_ = 0;
  size_t chunk_ = 0;  // tokens of the part next() handed out
  int64_t chunk_cap_ = 0;  // cap_chunk()
  int32_t last_ = 0;  // the token to decode next
  std::vector<float> logits_;
  // GenerateOptions::continuations: the one decoding, where they all begin,
  // the prompt's last logits row, and where this one's tokens begin.
  int continuation_ = 0;
  int64_t prompt_end_ = 0;
  std::vector<float> prompt_last_;
  size_t continuation_began_ = 0;
  bool finished_ = false;
  GenerateResult result_;
  std::chrono::steady_clock::time_point phase_began_ = std::chrono::steady_clock::now();
};

// Evaluates `prompt` after what the session already holds (which may be a
// graft), then decodes. The session must hold or receive at least one token.
GenerateResult generate(Session& session, std::span<const int32_t> prompt, const GenerateOptions& options);

// One forward pass for the next part of each unfinished generation, then
// each advanced. Their sessions must be able to share a pass (same model,
// recipe and ISA, on one device: Session::forward_batch, on a GPU too),
// else nothing runs and kvg::Error says why.
void step_together(std::span<Generation* const> generations);

}  // namespace kvg
