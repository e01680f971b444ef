// A conversation as the prompt tokens of a model: its chat style
// (engine/chat_template.hpp), the laid-out text, the tokens, and the tokens
// that end the assistant's turn. The same for the CLI and the extension.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat_template.hpp"
#include "engine/model.hpp"

namespace kvg {

struct ChatPrompt {
  ChatStyle style;
  std::vector<ChatSegment> segments;
  std::string text;             // the laid-out conversation: what the audit's input hash covers
  std::vector<int32_t> tokens;  // BOS when the vocabulary adds one, then the layout's tokens
  // Where the assistant's turn ends besides EOS and the vocabulary's
  // end-of-turn tokens: the format's end marker, when it is a token.
  std::vector<int32_t> stop_tokens;
};

// The style for `tokenizer`'s chat template; `requested` as in
// choose_chat_style ("auto", "plain", a format name).
ChatStyle model_chat_style(const Tokenizer& tokenizer, std::string_view requested = "auto");

// The markers of `format` that are special tokens of this vocabulary, longest
// first: the text these become ids for.
std::vector<std::string> special_markers(const Tokenizer& tokenizer, ChatFormat format);

// Tokens of `segments`, appended to `out`: a marker that is a special token
// of the vocabulary becomes its id, anything else is text, encoded without
// matching control tokens. Each text run is encoded as llama.cpp encodes a
// stretch after a special token (with the SentencePiece space prefix),
// except that a run at the very beginning of a continuation (`continuation`)
// gets none.
void append_segment_tokens(const Tokenizer& tokenizer, std::span<const ChatSegment> segments, bool continuation,
                           std::vector<int32_t>& out, const ProgressCheck& check = {});

// `text` split at every occurrence of a marker (longest first), the markers
// as marker segments.
std::vector<ChatSegment> split_at_markers(std::string_view text, const std::vector<std::string>& markers);

// InvalidArgument when `text` (`what`: which message) holds a marker's text:
// it would be a text token where the laid-out text reads as a marker, so the
// prompt's text would no longer say which tokens were computed.
void refuse_marker_text(std::string_view text, const std::vector<std::string>& markers, const std::string& what);

// Lays out and tokenizes the conversation, bounded by the context before and
// after tokenizing (engine/prompt.hpp).
ChatPrompt chat_prompt(const Model& model, const ChatStyle& style, const std::vector<ChatMessage>& messages,
                       const ProgressCheck& check = {}, int64_t context = 0);

}  // namespace kvg
