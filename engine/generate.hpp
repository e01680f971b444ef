// The decode loop shared by the CLI and the extension.
#pragma once

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
  ProgressReport decode_report;   // tokens decoded, of max_new_tokens
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated tokens (an end token that stopped it included)
  bool stopped_at_eos = false;  // at EOS, an end-of-turn token or a stop token
  double prefill_seconds = 0;
  double decode_seconds = 0;
};

// Evaluates `prompt` after what the session already holds (which may be a
// graft), then decodes. The session must hold or receive at least one token.
GenerateResult generate(Session& session, std::span<const int32_t> prompt, const GenerateOptions& options);

}  // namespace kvg
