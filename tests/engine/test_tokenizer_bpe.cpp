// Byte-level BPE ("gpt2" vocabularies): merge order on hand-made
// vocabularies, GPT-2's byte <-> unicode mapping, exact decoding of any
// bytes, special tokens only on request, add_bos/add_eos, the pre-tokenizer
// table, and refusals by name. llama.cpp's reference vectors for the real
// vocabularies are checked in test_tokenizer.cpp (TokenizerVectors).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/generate.hpp"
#include "engine/gguf/gguf_file.hpp"
#include "engine/model.hpp"
#include "engine/pretokenizer.hpp"
#include "engine/prompt.hpp"
#include "engine/session.hpp"
#include "engine/tokenizer.hpp"
#include "tests/support/data_paths.hpp"
#include "tools/gguf_writer.hpp"
#include "tools/synth_model.hpp"

namespace kvg {
namespace {

using Ids = std::vector<int32_t>;

const std::string kGpt2 = "tokenizer-vectors/ggml-vocab-gpt-2.gguf";
const std::string kDeepseekCoder = "tokenizer-vectors/ggml-vocab-deepseek-coder.gguf";
const std::vector<std::string> kBpeVocabs = {kGpt2, "tokenizer-vectors/ggml-vocab-starcoder.gguf", kDeepseekCoder,
                                             "tokenizer-vectors/ggml-vocab-falcon.gguf"};

Tokenizer load(const std::string& relative) { return Tokenizer::from_gguf(*gguf::File::open(test::data_path(relative))); }

// GPT-2's spelling of byte b (bytes_to_unicode), written out independently.
std::string byte_char(int b) {
  int cp = b;
  if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))) {
    int n = 0;
    for (int x = 0; x < b; ++x)
      if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF))) ++n;
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80) s += char(cp);
  else {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

// 256 byte tokens (id = byte), then `extra` pieces, with `merges`.
Tokenizer tiny_bpe(const std::vector<std::string>& extra, const std::vector<std::string>& merges,
                   const std::string& pre = "gpt-2") {
  Vocabulary v;
  v.model = TokenizerModel::Bpe;
  for (int b = 0; b < 256; ++b) v.pieces.push_back(byte_char(b));
  for (const std::string& p : extra) v.pieces.push_back(p);
  v.pieces.push_back("<|end|>");
  v.types.assign(v.pieces.size(), TokenType::Normal);
  v.types.back() = TokenType::Control;
  v.bos = v.eos = int32_t(v.pieces.size() - 1);
  v.unk = 0;
  v.add_bos = false;
  v.merges = merges;
  v.pre = pre;
  return Tokenizer(std::move(v));
}

TEST(TokenizerBpe, ByteMappingMatchesGpt2) {
  // The well-known anchors: space is "Ġ" (U+0120), newline "Ċ" (U+010A).
  EXPECT_EQ(byte_char(' '), "\xC4\xA0");
  EXPECT_EQ(byte_char('\n'), "\xC4\x8A");
  const Tokenizer tok = tiny_bpe({}, {});
  for (int b = 0; b < 256; ++b) {
    const std::string text(1, char(b));
    // A lone byte is one word whatever the pre-tokenizer does, and one token.
    EXPECT_EQ(tok.encode(text), Ids{b}) << "byte " << b;
    EXPECT_EQ(tok.decode({b}), text) << "byte " << b;
  }
}

TEST(TokenizerBpe, LowestRankMergesFirstAndTiesGoLeft) {
  // ids: 256 "ab", 257 "bc", 258 "aa"
  const Tokenizer tok = tiny_bpe({"ab", "bc", "aa"}, {"b c", "a b", "a a"});
  EXPECT_EQ(tok.encode("abc"), (Ids{'a', 257}));  // "b c" has rank 0
  const Tokenizer other = tiny_bpe({"ab", "bc", "aa"}, {"a b", "b c", "a a"});
  EXPECT_EQ(other.encode("abc"), (Ids{256, 'c'}));
  EXPECT_EQ(tok.encode("aaa"), (Ids{258, 'a'}));  // equal rank: the leftmost pair
  // Merges never cross words: " a" and "b" are separate words for gpt-2.
  EXPECT_EQ(tok.encode("a b"), (Ids{'a', ' ', 'b'}));
}

TEST(TokenizerBpe, IgnoreMergesLooksUpWholeWords) {
  // "abc" is a token but no merge reaches it: Llama 3 ("llama-bpe") takes it
  // whole, GPT-2 does not.
  const Tokenizer llama3 = tiny_bpe({"abc"}, {}, "llama-bpe");
  const Tokenizer gpt2 = tiny_bpe({"abc"}, {}, "gpt-2");
  EXPECT_EQ(llama3.encode("abc"), Ids{256});
  EXPECT_EQ(gpt2.encode("abc"), (Ids{'a', 'b', 'c'}));
}

TEST(TokenizerBpe, ControlTokensOnlyWhenAsked) {
  const Tokenizer tok = tiny_bpe({}, {});
  const int32_t end = int32_t(tok.size() - 1);
  EXPECT_EQ(tok.encode("x<|end|>y", true), (Ids{'x', end, 'y'}));
  const Ids plain = tok.encode("x<|end|>y");
  EXPECT_EQ(std::count(plain.begin(), plain.end(), end), 0);
  EXPECT_EQ(tok.decode(plain), "x<|end|>y");
  EXPECT_EQ(tok.decode({'x', end, 'y'}), "xy");  // control tokens are invisible
}

// Random text: any bytes on GPT-2 (its model spells all 256), random UTF-8 on all of them (up to U+3FFFF: StarCoder has
// no token for the lead bytes 0xF1..0xF4).
TEST(TokenizerBpe, RealVocabulariesDecodeExactly) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255), len(0, 64), kind(0, 9);
  std::uniform_int_distribution<uint32_t> ascii(0x20, 0x7E), two(0x80, 0x7FF), three(0x800, 0xD7FF),
      four(0x10000, 0x3FFFF);
  for (const std::string& vocab : kBpeVocabs) {
    KVG_REQUIRE_TEST_DATA(vocab);
    const Tokenizer tok = load(vocab);
    const bool all_bytes = vocab == kGpt2;
    for (int i = 0; i < 300; ++i) {
      std::string text;
      const int n = len(rng);
      for (int k = 0; k < n; ++k) {
        if (all_bytes && i % 2 == 0) {
          text += char(byte(rng));  // mostly invalid UTF-8
          continue;
        }
        const int kd = kind(rng);
        const uint32_t cp = kd < 6 ? ascii(rng) : kd < 8 ? two(rng) : kd < 9 ? three(rng) : four(rng);
        if (cp < 0x80) text += char(cp);
        else if (cp < 0x800) text += {char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
        else if (cp < 0x10000)
          text += {char(0xE0 | (cp >> 12)), char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
        else
          text += {char(0xF0 | (cp >> 18)), char(0x80 | ((cp >> 12) & 0x3F)), char(0x80 | ((cp >> 6) & 0x3F)),
                   char(0x80 | (cp & 0x3F))};
      }
      EXPECT_EQ(tok.decode(tok.encode(text)), text) << vocab << " case " << i;
    }
  }
}

// Falcon has no token for 0x03; DeepSeek Coder's only "ý" is an added
// (user-defined) token, which stands for the text "ý", not for the byte 0xFD.
TEST(TokenizerBpe, AByteTheVocabularyCannotSpellIsRefusedByName) {
  const std::string falcon = "tokenizer-vectors/ggml-vocab-falcon.gguf";
  const std::vector<std::pair<std::string, std::string>> cases = {{falcon, "\x03"}, {kDeepseekCoder, "\xFD"}};
  for (const auto& [vocab, byte] : cases) {
    KVG_REQUIRE_TEST_DATA(vocab);
    const Tokenizer tok = load(vocab);
    try {
      tok.encode("a" + byte + "b");
      ADD_FAILURE() << vocab << " encoded a byte it has no token for";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      const std::string name = byte == "\x03" ? "byte 0x03" : "byte 0xFD";
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
  KVG_REQUIRE_TEST_DATA(kDeepseekCoder);
  const Tokenizer ds = load(kDeepseekCoder);
  EXPECT_EQ(ds.encode("\xC3\xBD"), Ids{32003});
  // Added and control tokens count in the bound on text bytes per token:
  // one id stands for all the bytes of such a piece.
  size_t longest = 0;
  for (size_t id = 0; id < ds.size(); ++id)
    if (ds.vocabulary().types[id] != TokenType::Normal) longest = std::max(longest, ds.vocabulary().pieces[id].size());
  EXPECT_GE(longest, 10u);
  EXPECT_GE(ds.max_text_bytes_per_token(), longest);  // the text "ý" is the added token
  EXPECT_EQ(ds.decode({32003}), "\xC3\xBD");
}

TEST(TokenizerBpe, SpecialTokensAndAddBosFromTheFile) {
  KVG_REQUIRE_TEST_DATA(kGpt2);
  KVG_REQUIRE_TEST_DATA(kDeepseekCoder);
  const Tokenizer gpt2 = load(kGpt2);
  EXPECT_EQ(gpt2.encode("Hello world"), (Ids{15496, 995}));
  EXPECT_EQ(gpt2.encode("a<|endoftext|>", true), (Ids{64, 50256}));
  EXPECT_NE(gpt2.encode("a<|endoftext|>"), (Ids{64, 50256}));
  EXPECT_FALSE(gpt2.add_bos());  // no add_bos_token key: GPT-2 adds none
  EXPECT_EQ(gpt2.encode_prompt("Hello world"), (Ids{15496, 995}));
  const Tokenizer ds = load(kDeepseekCoder);
  EXPECT_TRUE(ds.add_bos());  // tokenizer.ggml.add_bos_token = true
  EXPECT_FALSE(ds.add_eos());
  const Ids prompt = ds.encode_prompt("Hello");
  ASSERT_GE(prompt.size(), 2u);
  EXPECT_EQ(prompt.front(), 32013);
}

TEST(PreTokenizer, EveryKnownNameCompilesAndSplitsLosslessly) {
  const std::string text = "Hello, world! 12345 ça   va?\n\n\tdéjà-vu 你好 \xFF\xFE 'll";
  for (const std::string& name : PreTokenizer::known_names()) {
    const PreTokenizer pre(name);
    std::string joined;
    for (const std::string_view w : pre.split(text)) {
      EXPECT_FALSE(w.empty()) << name;
      joined += w;
    }
    EXPECT_EQ(joined, text) << name;
  }
  std::vector<std::string> need = {"default", "gpt-2",    "llama-bpe", "qwen2",   "smollm",   "deepseek-llm",
                                   "deepseek-coder", "falcon", "starcoder", "mpt", "refact", "command-r"};
  const auto known = PreTokenizer::known_names();
  for (const std::string& n : need) EXPECT_NE(std::find(known.begin(), known.end(), n), known.end()) << n;
}

std::vector<std::string> words(const std::string& pre, const std::string& text) {
  std::vector<std::string> out;
  for (const std::string_view w : PreTokenizer(pre).split(text)) out.emplace_back(w);
  return out;
}

TEST(PreTokenizer, FamiliesSplitDigitsTheirOwnWay) {
  using W = std::vector<std::string>;
  EXPECT_EQ(words("gpt-2", "Hi 12345"), (W{"Hi", " 12345"}));
  EXPECT_EQ(words("llama-bpe", "Hi 12345"), (W{"Hi", " ", "123", "45"}));
  EXPECT_EQ(words("qwen2", "Hi 123"), (W{"Hi", " ", "1", "2", "3"}));
  EXPECT_EQ(words("starcoder", "x 12"), (W{"x", " ", "1", "2"}));
  EXPECT_EQ(words("llama-bpe", "I'LL go  now"), (W{"I", "'LL", " go", " ", " now"}));
  EXPECT_EQ(words("gpt-2", "a  b"), (W{"a", " ", " b"}));
}

std::string write_vocab(const std::string& name, const std::function<void(gguf::Writer&)>& fill) {
  gguf::Writer w;
  w.add_string("general.architecture", "phi3");  // an architecture the engine cannot run: irrelevant here
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(byte_char(b));
  w.add_array("tokenizer.ggml.tokens", std::span<const std::string>(tokens));
  w.add_string("tokenizer.ggml.model", "gpt2");
  fill(w);
  static const std::string dir = test::temp_dir("tokenizer-bpe");
  const std::string path = dir + "/" + name + ".gguf";
  w.write(path);
  return path;
}

void expect_load_error(const std::string& path, ErrorCode code, const std::string& mention) {
  try {
    Tokenizer::from_gguf(*gguf::File::open(path));
    ADD_FAILURE() << path << " loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
  }
}

TEST(TokenizerBpeGguf, LoadsWithoutCaringAboutTheArchitecture) {
  const std::vector<std::string> merges = {"a b"};
  const std::string path = write_vocab("phi3", [&](gguf::Writer& w) {
    w.add_array("tokenizer.ggml.merges", std::span<const std::string>(merges));
    w.add_string("tokenizer.ggml.pre", "gpt-2");
  });
  const Tokenizer tok = Tokenizer::from_gguf(*gguf::File::open(path));
  EXPECT_EQ(tok.model(), TokenizerModel::Bpe);
  EXPECT_EQ(tok.encode("ab"), (Ids{'a', 'b'}));  // the merge's result is no token: spelled by bytes
}

TEST(TokenizerBpeGguf, RefusesByName) {
  const std::vector<std::string> merges = {"a b"}, bad = {"ab"};
  expect_load_error(write_vocab("pre", [&](gguf::Writer& w) {
                      w.add_array("tokenizer.ggml.merges", std::span<const std::string>(merges));
                      w.add_string("tokenizer.ggml.pre", "tekken-ish");
                    }),
                    ErrorCode::Unsupported, "\"tekken-ish\"");
  expect_load_error(write_vocab("no-merges", [&](gguf::Writer&) {}), ErrorCode::Corrupt, "tokenizer.ggml.merges");
  expect_load_error(write_vocab("bad-merge", [&](gguf::Writer& w) {
                      w.add_array("tokenizer.ggml.merges", std::span<const std::string>(bad));
                    }),
                    ErrorCode::Corrupt, "'ab'");
}

// A model whose vocabulary is byte-level BPE runs end to end: it loads, its
// prompt follows the file's add_bos, and what it generates decodes to bytes.
TEST(TokenizerBpeModel, LoadsPromptsAndGenerates) {
  SynthOptions o;
  o.n_embd = 64, o.n_layer = 1, o.n_head = 4, o.n_head_kv = 2, o.n_ff = 96, o.n_vocab = 260, o.n_ctx = 64;
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(byte_char(b));
  for (const char* t : {"he", "ll", "hell", "<|end|>"}) tokens.emplace_back(t);
  std::vector<int32_t> types(tokens.size(), 1);
  types.back() = 3;
  const std::vector<std::string> merges = {"h e", "l l", "he ll"};
  for (const bool add_bos : {false, true}) {
    gguf::Writer w;
    w.add_string("general.architecture", "llama");
    for (const auto& [key, value] : std::vector<std::pair<std::string, uint32_t>>{
             {"context_length", 64}, {"embedding_length", 64}, {"feed_forward_length", 96}, {"block_count", 1},
             {"attention.head_count", 4}, {"attention.head_count_kv", 2}})
      w.add_u32("llama." + key, value);
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_string("tokenizer.ggml.pre", "llama-bpe");
    w.add_array("tokenizer.ggml.tokens", std::span<const std::string>(tokens));
    w.add_array("tokenizer.ggml.token_type", std::span<const int32_t>(types));
    w.add_array("tokenizer.ggml.merges", std::span<const std::string>(merges));
    w.add_u32("tokenizer.ggml.bos_token_id", 259);
    w.add_u32("tokenizer.ggml.eos_token_id", 259);
    w.add_bool("tokenizer.ggml.add_bos_token", add_bos);
    uint64_t index = 0;
    for (const SynthTensor& t : synth_tensors(o)) {
      std::vector<float> values(t.ne[0] * (t.ne.size() > 1 ? t.ne[1] : 1));
      for (size_t i = 0; i < values.size(); ++i) values[i] = synth_weight(7, index, t, i);
      std::vector<uint8_t> bytes(values.size() * 4);
      std::memcpy(bytes.data(), values.data(), bytes.size());
      w.add_tensor(t.name, t.ne, gguf::TensorType::F32, std::move(bytes));
      ++index;
    }
    const std::string path = test::temp_dir("bpe-model") + "/model.gguf";
    w.write(path);
    const auto model = Model::load(path);
    ASSERT_EQ(model->tokenizer().model(), TokenizerModel::Bpe);
    Ids expected = {256 + 2, 'o'};  // "hell" by merges, then "o"
    if (add_bos) expected.insert(expected.begin(), 259);
    EXPECT_EQ(fresh_prompt(*model, "hello"), expected);
    Session session(model, EngineOptions{});
    GenerateOptions options;
    options.max_new_tokens = 5;
    options.stop_at_eos = false;
    const Ids prompt = fresh_prompt(*model, "hello");
    const GenerateResult result = generate(session, prompt, options);
    ASSERT_EQ(result.tokens.size(), 5u);
    std::string text;
    for (const int32_t id : result.tokens) text += model->tokenizer().decode({id});
    EXPECT_EQ(text, model->tokenizer().decode(result.tokens));
  }
}

}  // namespace
}  // namespace kvg
