// The pre-tokenizer regex table and the PCRE2 split loop.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "engine/pretokenizer.hpp"

#include <pcre2.h>

#include "common/error.hpp"

namespace kvg {

namespace {

// The regexes, as published in the families' tokenizer.json files (the
// case-insensitive contractions of Llama 3 / Qwen2 written out as classes).
constexpr const char* kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kBloom = R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{0964}\x{06D4}\x{060C})]+)";
// DeepSeek LLM: letters of the scripts its tokenizer lists, spelled as ranges.
// Written with \x{...} escapes: several of these characters have canonical
// equivalents (U+1F7D ~ U+03CE, U+212A ~ "K", U+2126 ~ U+03A9) that an
// editor or a copy may silently normalise, which would change the ranges.
constexpr const char* kDeepseekLlmLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF})"
    R"(\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1})"
    R"(\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5})"
    R"(\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A})"
    R"(\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B})"
    R"(\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC})"
    R"(\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})"
    R"(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134})"
    R"(\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
    R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787})"
    R"(\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A})"
    R"(\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})"
    R"(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";
constexpr const char* kDeepseekLlmPunct = R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";
constexpr const char* kCjk = R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";

struct Family {
  std::vector<const char*> names;  // tokenizer.ggml.pre values
  std::vector<const char*> patterns;
  bool ignore_merges = false;
};

const std::vector<Family>& families() {
  static const std::vector<Family> table = {
      {{"default"},
       {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", R"([0-9][0-9][0-9])"}},
      {{"gpt-2", "phi-2", "mpt", "olmo", "jais"}, {kGpt2}},
      {{"llama-bpe", "llama3", "llama-v3"}, {kLlama3}, true},
      {{"dbrx", "smaug-bpe"}, {kLlama3}},
      {{"qwen2", "stablelm2", "deepseek-r1-qwen"}, {kQwen2}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
       {R"(\p{N})", kGpt2}},
      {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, R"([0-9][0-9][0-9])"}},
      {{"deepseek-llm"},
       {R"([\r\n])", kDeepseekLlmLetters, kDeepseekLlmPunct, R"(\s+$)", kCjk, R"(\p{N}+)"}},
      {{"deepseek-coder"}, {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjk, R"(\p{N})"}},
      {{"poro-chat", "bloom", "gpt3-finnish"}, {kBloom}},
      {{"viking"}, {kBloom, R"(\p{N})"}},
  };
  return table;
}

}  // namespace

struct PreTokenizer::Pattern {
  pcre2_code* code = nullptr;
  ~Pattern() { pcre2_code_free(code); }
};

std::vector<std::string> PreTokenizer::known_names() {
  std::vector<std::string> names;
  for (const Family& f : families())
    for (const char* n : f.names) names.emplace_back(n);
  return names;
}

PreTokenizer::PreTokenizer(const std::string& pre) : name_(pre) {
  const Family* family = nullptr;
  for (const Family& f : families())
    for (const char* n : f.names)
      if (pre == n) family = &f;
  if (!family) {
    std::string known;
    for (const std::string& n : known_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error(ErrorCode::Unsupported, "tokenizer: tokenizer.ggml.pre = \"" + pre +
                                            "\" is a pre-tokenizer this engine does not implement (implemented: " +
                                            known + ")");
  }
  ignore_merges_ = family->ignore_merges;
  for (const char* source : family->patterns) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    auto p = std::make_unique<Pattern>();
    p->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source), PCRE2_ZERO_TERMINATED,
                            PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
    if (!p->code) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof message);
      throw Error(ErrorCode::Internal, "tokenizer: pre-tokenizer '" + pre + "' pattern does not compile at " +
                                           std::to_string(offset) + ": " + reinterpret_cast<char*>(message));
    }
    pcre2_jit_compile(p->code, PCRE2_JIT_COMPLETE);  // best effort: the interpreter gives the same matches
    patterns_.push_back(std::move(p));
  }
}

PreTokenizer::~PreTokenizer() = default;

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> fragments{text}, next;
  if (text.empty()) return {};
  pcre2_match_data* match = nullptr;
  for (const auto& pattern : patterns_) {
    if (!match) match = pcre2_match_data_create(1, nullptr);
    if (!match) throw Error(ErrorCode::Internal, "tokenizer: out of memory for PCRE2 match data");
    next.clear();
    for (const std::string_view fragment : fragments) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(fragment.data());
      size_t pos = 0, gap = 0;  // next search start; start of the unmatched text
      while (pos < fragment.size()) {
        const int rc = pcre2_match(pattern->code, subject, fragment.size(), pos, 0, match, nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          pcre2_match_data_free(match);
          throw Error(ErrorCode::Internal, "tokenizer: PCRE2 match failed with code " + std::to_string(rc));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match);
        const size_t begin = ov[0], end = ov[1];
        if (end == begin) {  // no pattern here matches empty; never loop on one
          pos = begin + 1;
          continue;
        }
        if (begin > gap) next.push_back(fragment.substr(gap, begin - gap));
        next.push_back(fragment.substr(begin, end - begin));
        pos = gap = end;
      }
      if (gap < fragment.size()) next.push_back(fragment.substr(gap));
    }
    fragments.swap(next);
  }
  pcre2_match_data_free(match);
  return fragments;
}

}  // namespace kvg
