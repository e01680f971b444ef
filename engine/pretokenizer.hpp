// Byte-level BPE pre-tokenizers: the regex sequences that split text into
// words before merging, one per `tokenizer.ggml.pre` value in common use.
//
// The patterns are the public regexes of each model family's tokenizer.json
// (as llama.cpp applies them). They run through PCRE2 in UTF + UCP mode, so
// \p{L}, \p{N}, \p{P} and \s have their Unicode meaning. A sequence of
// patterns is applied like llama.cpp's unicode_regex_split: each pattern
// splits every fragment left by the previous one into its matches and the
// unmatched gaps between them (both kept), and a pattern never sees past the
// fragment it runs on (lookaheads and `$` stop at the fragment's end).
// Invalid UTF-8 never matches (PCRE2_MATCH_INVALID_UTF): such bytes stay in
// the gaps, and byte-level BPE still encodes and decodes them exactly.
//
// Why PCRE2 and not hand-written matchers: the patterns stay readable and
// checkable against their published form, and with its JIT it is fast
// enough. Measured with `kvg tokenize --file F --bench` on 1 MiB of English
// (licence texts), one thread of a shared 2-core VM: GPT-2 1.28 M tokens/s,
// StarCoder 0.94 M, DeepSeek Coder 0.93 M, Falcon 0.84 M (the SentencePiece
// Llama tokenizer, for comparison: 0.37 M). A prompt costs microseconds.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kvg {

class PreTokenizer {
 public:
  // Throws Error(Unsupported) naming `pre` when it is not one we implement.
  explicit PreTokenizer(const std::string& pre);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // The words of `text`, in order; they concatenate back to `text`.
  std::vector<std::string_view> split(std::string_view text) const;

  // Llama 3 looks a whole word up as a token before merging (tokenizer.json's
  // "ignore_merges"): a word that is a token is that token.
  bool ignore_merges() const { return ignore_merges_; }
  const std::string& name() const { return name_; }

  // The `tokenizer.ggml.pre` values accepted, for messages and docs.
  static std::vector<std::string> known_names();

 private:
  struct Pattern;
  std::string name_;
  bool ignore_merges_ = false;
  std::vector<std::unique_ptr<Pattern>> patterns_;
};

}  // namespace kvg
