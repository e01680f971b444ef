// The SentencePiece-style ("llama") tokenizer: the merge algorithm on small
// hand-made vocabularies, llama.cpp's reference vectors on the 32k Llama
// vocabulary, round trips, and the vocabularies of both test models.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/gguf/gguf_file.hpp"
#include "engine/tokenizer.hpp"
#include "tests/support/data_paths.hpp"
#include "tools/gguf_writer.hpp"

namespace kvg {
namespace {

using Ids = std::vector<int32_t>;

const char* kLlamaSpm = "tokenizer-vectors/ggml-vocab-llama-spm.gguf";
const char* kLlamaSpmInp = "tokenizer-vectors/ggml-vocab-llama-spm.gguf.inp";
const char* kLlamaSpmOut = "tokenizer-vectors/ggml-vocab-llama-spm.gguf.out";
const std::string kSp = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// ---------------------------------------------------------------- helpers

std::string show(const Ids& ids) {
  std::string s;
  for (const int32_t id : ids) s += " " + std::to_string(id);
  return s.empty() ? "(none)" : s;
}

// Text readable in a failure message: control and non-ASCII bytes escaped.
std::string escape(std::string_view text) {
  static const char* hex = "0123456789ABCDEF";
  std::string out = "\"";
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '"' || c == '\\') (out += '\\') += ch;
    else if (c >= 0x20 && c < 0x7F) out += ch;
    else (((out += "\\x") += hex[c >> 4]) += hex[c & 15]);
  }
  return out + "\"";
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Tokenizer load(const std::string& relative) {
  const auto file = gguf::File::open(test::data_path(relative));
  return Tokenizer::from_gguf(*file);
}

// Loaded once: 32k pieces are cheap, but several tests share them.
const Tokenizer& llama_spm() {
  static const Tokenizer tok = load(kLlamaSpm);
  return tok;
}

// A hand-made vocabulary: <unk>, <s>, </s>, optionally the 256 byte tokens,
// then the given normal pieces (text, score).
struct TinyVocab {
  Vocabulary v;
  explicit TinyVocab(bool bytes = true, bool space_prefix = false) {
    add("<unk>", 0, TokenType::Unknown);
    add("<s>", 0, TokenType::Control);
    add("</s>", 0, TokenType::Control);
    if (bytes) {
      static const char* hex = "0123456789ABCDEF";
      for (int b = 0; b < 256; ++b)
        add(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">", 0, TokenType::Byte);
    }
    v.add_space_prefix = space_prefix;
  }
  int32_t add(const std::string& piece, float score, TokenType type = TokenType::Normal) {
    v.pieces.push_back(piece);
    v.scores.push_back(score);
    v.types.push_back(type);
    return static_cast<int32_t>(v.pieces.size() - 1);
  }
  int32_t byte(int b) const { return 3 + b; }
};

// ------------------------------------------------- merge algorithm (tiny)

TEST(TokenizerMerge, HighestScoreMergesFirst) {
  TinyVocab t;
  const int32_t a = t.add("a", -10);
  t.add("b", -10);
  const int32_t c = t.add("c", -10);
  t.add("ab", -2);
  const int32_t bc = t.add("bc", -1);
  EXPECT_EQ(Tokenizer(t.v).encode("abc"), (Ids{a, bc}));
  t.v.scores[bc] = -3;  // now "ab" is the better merge
  EXPECT_EQ(Tokenizer(t.v).encode("abc"), (Ids{bc - 1, c}));
}

TEST(TokenizerMerge, EqualScoresMergeLeftmostFirst) {
  TinyVocab t;
  t.add("a", -10);
  const int32_t b = t.add("b", -10);
  const int32_t ab = t.add("ab", -1), ba = t.add("ba", -1);
  Tokenizer tok(t.v);
  // "abab": pairs ab(0) ba(1) ab(2) tie; leftmost "ab" wins, then "ab" again.
  EXPECT_EQ(tok.encode("abab"), (Ids{ab, ab}));
  // "bab": ba(0) beats ab(1).
  EXPECT_EQ(tok.encode("bab"), (Ids{ba, b}));
}

TEST(TokenizerMerge, OnlyPairsThatArePiecesMerge) {
  // "abc" is a piece, but neither "ab" nor "bc" is: BPE never reaches it.
  TinyVocab t;
  const int32_t a = t.add("a", -1), b = t.add("b", -1), c = t.add("c", -1);
  t.add("abc", 100);
  EXPECT_EQ(Tokenizer(t.v).encode("abc"), (Ids{a, b, c}));
}

TEST(TokenizerMerge, SpacesAndPrefix) {
  TinyVocab t(true, /*space_prefix=*/true);
  const int32_t sp = t.add(kSp, -5);
  t.add("a", -5);
  const int32_t spa = t.add(kSp + "a", -1);
  Tokenizer tok(t.v);
  EXPECT_EQ(tok.encode(""), Ids{});  // no prefix for empty text
  EXPECT_EQ(tok.encode("a"), (Ids{spa}));
  EXPECT_EQ(tok.encode("a a"), (Ids{spa, spa}));
  EXPECT_EQ(tok.encode(" a"), (Ids{sp, spa}));
  EXPECT_EQ(tok.encode("a "), (Ids{spa, sp}));
  TinyVocab n(true, /*space_prefix=*/false);
  const int32_t na = n.add("a", -5), nspa = n.add(kSp + "a", -1);
  EXPECT_EQ(Tokenizer(n.v).encode("a a"), (Ids{na, nspa}));
}

TEST(TokenizerMerge, ByteFallbackForUnknownCharacters) {
  TinyVocab t;
  const int32_t a = t.add("a", -1);
  Tokenizer tok(t.v);
  // U+00E9 is C3 A9 in UTF-8; U+1F999 is F0 9F A6 99.
  EXPECT_EQ(tok.encode("a\xC3\xA9" "a"), (Ids{a, t.byte(0xC3), t.byte(0xA9), a}));
  EXPECT_EQ(tok.encode("\xF0\x9F\xA6\x99"), (Ids{t.byte(0xF0), t.byte(0x9F), t.byte(0xA6), t.byte(0x99)}));
  // A stray continuation byte is a symbol of its own and keeps what follows intact.
  EXPECT_EQ(tok.encode("\xA9" "a"), (Ids{t.byte(0xA9), a}));
}

TEST(TokenizerMerge, UnknownWithoutByteTokensCollapsesRuns) {
  TinyVocab t(/*bytes=*/false);
  const int32_t a = t.add("a", -1);
  Tokenizer tok(t.v);
  // SentencePiece emits one <unk> for a run of unknown characters.
  EXPECT_EQ(tok.encode("\xC3\xA9\xC3\xA9"), (Ids{0}));
  EXPECT_EQ(tok.encode("\xC3\xA9" "a\xC3\xA9"), (Ids{0, a, 0}));
  EXPECT_EQ(tok.decode({0, a, 0}), " \xE2\x81\x87 a \xE2\x81\x87 ");
}

TEST(TokenizerMerge, ControlTokensAreNeverProducedFromText) {
  TinyVocab t;
  const int32_t lt = t.add("<", -1);
  t.add("s", -1);
  const int32_t gt = t.add(">", -1), lts = t.add("<s", 0);
  Tokenizer tok(t.v);
  // "<s>" is the text of control token 1; plain text never reaches it.
  EXPECT_EQ(tok.encode("<s>"), (Ids{lts, gt}));
  // Nor byte pieces spelled out.
  EXPECT_EQ(tok.encode("<0x41>").front(), lt);
}

TEST(TokenizerMerge, UserDefinedPiecesMatchWhole) {
  TinyVocab t;
  const int32_t x = t.add("x", -1), y = t.add("y", -1);
  t.add("x<", 50);  // would win a merge, but the user-defined piece is taken first
  const int32_t tag = t.add("<tag>", 0, TokenType::UserDefined);
  const int32_t tagx = t.add("<tagx>", 0, TokenType::UserDefined);
  Tokenizer tok(t.v);
  EXPECT_EQ(tok.encode("x<tag>y"), (Ids{x, tag, y}));
  EXPECT_EQ(tok.encode("<tagx>"), (Ids{tagx}));  // longest match
}

TEST(TokenizerMerge, UnusedPiecesAreSplitBack) {
  TinyVocab t;
  const int32_t a = t.add("a", -1), b = t.add("b", -1);
  t.add("c", -1);
  t.add("ab", 10, TokenType::Unused);
  const int32_t abc = t.add("abc", 5);
  Tokenizer tok(t.v);
  EXPECT_EQ(tok.encode("ab"), (Ids{a, b}));
  EXPECT_EQ(tok.encode("abc"), (Ids{abc}));  // an unused piece may still be a step
  EXPECT_EQ(tok.encode("abab"), (Ids{a, b, a, b}));
}

TEST(TokenizerMerge, DuplicatePiecesKeepTheFirstId) {
  TinyVocab t;
  const int32_t first = t.add("a", -1);
  const int32_t second = t.add("a", 100);
  Tokenizer tok(t.v);
  EXPECT_EQ(tok.encode("a"), (Ids{first}));
  EXPECT_EQ(tok.decode({second}), "a");
}

TEST(TokenizerMerge, EncodeWithBosPrependsBos) {
  TinyVocab t;
  const int32_t a = t.add("a", -1);
  Tokenizer tok(t.v);
  EXPECT_EQ(tok.encode_with_bos("a"), (Ids{1, a}));
  EXPECT_EQ(tok.encode_with_bos(""), (Ids{1}));
}

// ------------------------------------------------------- decoding (tiny)

TEST(TokenizerDecode, PiecesBytesAndControl) {
  TinyVocab t(true, /*space_prefix=*/true);
  const int32_t hello = t.add(kSp + "Hello", -1), world = t.add(kSp + "world", -1), sp = t.add(kSp, -1);
  Tokenizer tok(t.v);
  EXPECT_EQ(tok.decode({hello, world}), "Hello world");
  EXPECT_EQ(tok.decode({1, hello, world, 2}), "Hello world");
  // Only the first piece loses its space: " Hello" encodes as ▁ ▁Hello.
  EXPECT_EQ(tok.decode({sp, hello}), " Hello");
  EXPECT_EQ(tok.decode({1, 1, hello}), "Hello");
  // Byte tokens reassemble UTF-8: U+00E9.
  EXPECT_EQ(tok.decode({hello, t.byte(0xC3), t.byte(0xA9)}), "Hello\xC3\xA9");
  EXPECT_EQ(tok.decode({t.byte(' '), hello}), "  Hello");  // a space byte is not the prefix
  EXPECT_EQ(tok.decode({}), "");
}

TEST(TokenizerDecode, PieceByPieceAfterBos) {
  TinyVocab t(true, /*space_prefix=*/true);
  const int32_t hello = t.add(kSp + "Hello", -1), world = t.add(kSp + "world", -1);
  Tokenizer tok(t.v);
  EXPECT_EQ(tok.decode_piece(hello, tok.bos()), "Hello");
  EXPECT_EQ(tok.decode_piece(hello, -1), "Hello");
  EXPECT_EQ(tok.decode_piece(world, hello), " world");
  EXPECT_EQ(tok.decode_piece(tok.bos(), -1), "");
  EXPECT_EQ(tok.decode_piece(tok.eos(), hello), "");
  EXPECT_EQ(tok.decode_piece(t.byte(0x41), hello), "A");
  EXPECT_EQ(tok.decode_piece(0, hello), " \xE2\x81\x87 ");  // <unk>, as SentencePiece shows it
}

TEST(TokenizerDecode, NoPrefixNoStripping) {
  TinyVocab t(true, /*space_prefix=*/false);
  const int32_t hello = t.add(kSp + "Hello", -1);
  Tokenizer tok(t.v);
  EXPECT_EQ(tok.decode({1, hello}), " Hello");
}

TEST(TokenizerDecode, RejectsIdsOutsideTheVocabulary) {
  TinyVocab t;
  Tokenizer tok(t.v);
  for (const int32_t bad : {-1, static_cast<int32_t>(tok.size())}) {
    try {
      tok.decode({bad});
      ADD_FAILURE() << "id " << bad << " decoded";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::OutOfRange) << e.what();
    }
  }
}

// ---------------------------------------------------- validation (tiny)

void expect_invalid(Vocabulary v, const std::string& what) {
  try {
    Tokenizer tok(std::move(v));
    ADD_FAILURE() << "accepted a vocabulary with " << what;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << what << ": " << e.what();
  }
}

TEST(TokenizerVocabulary, RejectsInconsistentVocabularies) {
  const Vocabulary good = TinyVocab().v;
  EXPECT_NO_THROW(Tokenizer{good});
  expect_invalid(Vocabulary{}, "no pieces");
  Vocabulary v = good;
  v.scores.pop_back();
  expect_invalid(v, "fewer scores than pieces");
  v = good;
  v.types.push_back(TokenType::Normal);
  expect_invalid(v, "more types than pieces");
  v = good;
  v.bos = static_cast<int32_t>(v.pieces.size());
  expect_invalid(v, "bos out of range");
  v = good;
  v.eos = -1;
  expect_invalid(v, "negative eos");
  v = good;
  v.unk = 100000;
  expect_invalid(v, "unk out of range");
  v = good;
  v.pieces[3] = "<0xZZ>";
  expect_invalid(v, "a malformed byte piece");
  v = good;
  v.types[5] = static_cast<TokenType>(9);
  expect_invalid(v, "an unknown token type");
  v = good;
  v.scores[4] = std::numeric_limits<float>::quiet_NaN();
  expect_invalid(v, "a NaN score");
}

TEST(TokenizerVocabulary, MissingScoresAndTypesDefault) {
  Vocabulary v;
  v.pieces = {"<unk>", "<s>", "</s>", "a", "b", "ab"};
  v.add_space_prefix = false;
  Tokenizer tok(v);
  EXPECT_EQ(tok.vocabulary().scores, std::vector<float>(6, 0.0f));
  EXPECT_EQ(tok.vocabulary().types, std::vector<TokenType>(6, TokenType::Normal));
  EXPECT_EQ(tok.encode("ab"), (Ids{5}));
}

// ------------------------------------------------ from_gguf (synthetic)

struct GgufVocab {
  std::vector<std::string> tokens{"<unk>", "<s>", "</s>", "<0x41>", "a", "b", "ab"};
  std::vector<float> scores{0, 0, 0, 0, -1, -1, -0.5f};
  std::vector<int32_t> types{2, 3, 3, 6, 1, 1, 1};
};

std::string write_vocab(const std::string& name, const std::function<void(gguf::Writer&)>& fill) {
  gguf::Writer w;
  w.add_string("general.architecture", "llama");
  fill(w);
  static const std::string dir = test::temp_dir("tokenizer");
  const std::string path = dir + "/" + name + ".gguf";
  w.write(path);
  return path;
}

Tokenizer from_file(const std::string& path) { return Tokenizer::from_gguf(*gguf::File::open(path)); }

void expect_load_error(const std::string& path, ErrorCode code, const std::string& mention) {
  try {
    from_file(path);
    ADD_FAILURE() << path << " loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
  }
}

TEST(TokenizerGguf, ReadsEveryKey) {
  const GgufVocab g;
  const std::string path = write_vocab("full", [&](gguf::Writer& w) {
    w.add_string("tokenizer.ggml.model", "llama");
    w.add_array("tokenizer.ggml.tokens", std::span<const std::string>(g.tokens));
    w.add_array("tokenizer.ggml.scores", std::span<const float>(g.scores));
    w.add_array("tokenizer.ggml.token_type", std::span<const int32_t>(g.types));
    w.add_u32("tokenizer.ggml.bos_token_id", 2);
    w.add_u32("tokenizer.ggml.eos_token_id", 1);
    w.add_u32("tokenizer.ggml.unknown_token_id", 0);
    w.add_bool("tokenizer.ggml.add_bos_token", false);
    w.add_bool("tokenizer.ggml.add_space_prefix", false);
  });
  const Tokenizer tok = from_file(path);
  EXPECT_EQ(tok.size(), 7u);
  EXPECT_EQ(tok.bos(), 2);
  EXPECT_EQ(tok.eos(), 1);
  EXPECT_FALSE(tok.add_bos());
  EXPECT_FALSE(tok.vocabulary().add_space_prefix);
  EXPECT_EQ(tok.vocabulary().scores, g.scores);
  EXPECT_EQ(tok.vocabulary().types[3], TokenType::Byte);
  EXPECT_EQ(tok.encode("abA"), (Ids{6, 3}));
}

TEST(TokenizerGguf, OptionalKeysDefault) {
  const GgufVocab g;
  const std::string path = write_vocab("minimal", [&](gguf::Writer& w) {
    w.add_string("tokenizer.ggml.model", "llama");
    w.add_array("tokenizer.ggml.tokens", std::span<const std::string>(g.tokens));
  });
  const Tokenizer tok = from_file(path);
  EXPECT_EQ(tok.bos(), 1);
  EXPECT_EQ(tok.eos(), 2);
  EXPECT_EQ(tok.vocabulary().unk, 0);
  EXPECT_TRUE(tok.add_bos());
  EXPECT_TRUE(tok.vocabulary().add_space_prefix);
  EXPECT_EQ(tok.vocabulary().scores, std::vector<float>(7, 0.0f));
  // Without token types, "<0xNN>" pieces and the special ids are still
  // recognised, so they decode as a byte and as nothing, not as their text.
  const auto& types = tok.vocabulary().types;
  EXPECT_EQ(types[0], TokenType::Unknown);
  EXPECT_EQ(types[1], TokenType::Control);
  EXPECT_EQ(types[2], TokenType::Control);
  EXPECT_EQ(types[3], TokenType::Byte);
  EXPECT_EQ(types[4], TokenType::Normal);
  EXPECT_EQ(tok.decode({1, 3, 4, 2}), "Aa");
}

TEST(TokenizerGguf, RejectsOtherTokenizerModels) {
  const GgufVocab g;
  const std::string path = write_vocab("bert", [&](gguf::Writer& w) {
    w.add_string("tokenizer.ggml.model", "bert");
    w.add_array("tokenizer.ggml.tokens", std::span<const std::string>(g.tokens));
  });
  expect_load_error(path, ErrorCode::Unsupported, "\"bert\"");
  const std::string none = write_vocab("none", [&](gguf::Writer&) {});
  expect_load_error(none, ErrorCode::Corrupt, "tokenizer.ggml.model");
}

TEST(TokenizerGguf, RejectsInconsistentMetadata) {
  const GgufVocab g;
  const auto with = [&](const std::string& name, const std::function<void(gguf::Writer&)>& extra) {
    return write_vocab(name, [&](gguf::Writer& w) {
      w.add_string("tokenizer.ggml.model", "llama");
      w.add_array("tokenizer.ggml.tokens", std::span<const std::string>(g.tokens));
      extra(w);
    });
  };
  const std::vector<float> short_scores(3, 0.0f);
  expect_load_error(with("scores", [&](gguf::Writer& w) {
                      w.add_array("tokenizer.ggml.scores", std::span<const float>(short_scores));
                    }),
                    ErrorCode::Corrupt, "tokenizer.ggml.scores");
  const std::vector<int32_t> long_types(8, 1);
  expect_load_error(with("types", [&](gguf::Writer& w) {
                      w.add_array("tokenizer.ggml.token_type", std::span<const int32_t>(long_types));
                    }),
                    ErrorCode::Corrupt, "tokenizer.ggml.token_type");
  std::vector<int32_t> bad_type = g.types;
  bad_type[4] = 42;
  expect_load_error(with("badtype", [&](gguf::Writer& w) {
                      w.add_array("tokenizer.ggml.token_type", std::span<const int32_t>(bad_type));
                    }),
                    ErrorCode::Corrupt, "42");
  expect_load_error(with("bos", [&](gguf::Writer& w) { w.add_u32("tokenizer.ggml.bos_token_id", 7); }),
                    ErrorCode::Corrupt, "bos_token_id");
  expect_load_error(with("unk", [&](gguf::Writer& w) {
                      w.add_u32("tokenizer.ggml.unknown_token_id", 0xFFFFFFFFu);
                    }),
                    ErrorCode::Corrupt, "unknown_token_id");
  std::vector<int32_t> wrong_byte = g.types;
  wrong_byte[4] = 6;  // "a" claims to be a byte token
  expect_load_error(with("byte", [&](gguf::Writer& w) {
                      w.add_array("tokenizer.ggml.token_type", std::span<const int32_t>(wrong_byte));
                    }),
                    ErrorCode::Corrupt, "<0xNN>");
}

// --------------------------------------- llama.cpp's reference vectors

struct VectorCase {
  std::string text;
  Ids ids;
};

// The .inp file is the test strings, each followed by "\n__ggml_vocab_test__\n"
// (so a string's own trailing newline is the one before the separator line
// and is not part of it; "\n" on its own line between separators is the
// string "\n"). The .out file has one line per string: " id id ...", empty for
// the empty string. This is how llama.cpp's test-tokenizer-0 reads them.
std::vector<VectorCase> read_vectors(const std::string& vocab = kLlamaSpm) {
  std::string inp = slurp(test::data_path(vocab + ".inp"));
  const std::string out = slurp(test::data_path(vocab + ".out"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<VectorCase> cases;
  size_t at = 0;
  for (size_t found; (found = inp.find(sep, at)) != std::string::npos; at = found + sep.size())
    cases.push_back({inp.substr(at, found - at), {}});
  EXPECT_EQ(at, inp.size()) << "text after the last separator";
  std::istringstream lines(out);
  std::string line;
  size_t i = 0;
  for (; std::getline(lines, line); ++i) {
    if (i >= cases.size()) break;
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) cases[i].ids.push_back(id);
  }
  EXPECT_EQ(i, cases.size()) << "the .out file has a different number of lines than the .inp has strings";
  return cases;
}

TEST(TokenizerLlamaSpm, ReproducesEveryReferenceVector) {
  KVG_REQUIRE_TEST_DATA(kLlamaSpm);
  KVG_REQUIRE_TEST_DATA(kLlamaSpmInp);
  KVG_REQUIRE_TEST_DATA(kLlamaSpmOut);
  const Tokenizer& tok = llama_spm();
  ASSERT_EQ(tok.size(), 32000u);
  const std::vector<VectorCase> cases = read_vectors();
  ASSERT_EQ(cases.size(), 46u);
  size_t passed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Ids got = tok.encode(cases[i].text);
    EXPECT_EQ(got, cases[i].ids) << "vector " << i << " " << escape(cases[i].text) << "\n  expected"
                                 << show(cases[i].ids) << "\n  got     " << show(got);
    passed += got == cases[i].ids;
  }
  std::cout << "[ vectors  ] " << passed << "/" << cases.size() << " reference strings reproduced\n";
}

// Every vocabulary we claim, through one test: the SentencePiece Llama
// vocabulary and the byte-level BPE ones (each with its own pre-tokenizer).
// Every line of llama.cpp's .out must be reproduced, and byte-level BPE
// must decode each string back to its exact bytes.
class TokenizerVectors : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenizerVectors, ReproducesEveryReferenceLine) {
  const std::string vocab = std::string("tokenizer-vectors/ggml-vocab-") + GetParam() + ".gguf";
  KVG_REQUIRE_TEST_DATA(vocab);
  KVG_REQUIRE_TEST_DATA(vocab + ".inp");
  KVG_REQUIRE_TEST_DATA(vocab + ".out");
  const Tokenizer tok = load(vocab);
  const std::vector<VectorCase> cases = read_vectors(vocab);
  ASSERT_EQ(cases.size(), 46u);
  size_t passed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Ids got = tok.encode(cases[i].text);
    EXPECT_EQ(got, cases[i].ids) << GetParam() << " vector " << i << " " << escape(cases[i].text)
                                 << "\n  expected" << show(cases[i].ids) << "\n  got     " << show(got);
    passed += got == cases[i].ids;
    if (tok.model() == TokenizerModel::Bpe) {
      EXPECT_EQ(tok.decode(got), cases[i].text) << GetParam() << " vector " << i;
    }
  }
  std::cout << "[ vectors  ] " << GetParam() << ": " << passed << "/" << cases.size()
            << " reference strings reproduced\n";
}

INSTANTIATE_TEST_SUITE_P(AllVocabularies, TokenizerVectors,
                         ::testing::Values("llama-spm", "gpt-2", "starcoder", "deepseek-coder", "falcon"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

// Control tokens written in the text are matched only when asked for; each
// stretch of text after one is encoded as if it started the text (space
// prefix included), as llama.cpp does.
TEST(TokenizerLlamaSpm, ControlTokensInTextOnlyWhenAsked) {
  KVG_REQUIRE_TEST_DATA(kLlamaSpm);
  const Tokenizer& tok = llama_spm();
  Ids expected = {1};
  const Ids hello = tok.encode("Hello");
  expected.insert(expected.end(), hello.begin(), hello.end());
  EXPECT_EQ(tok.encode("<s>Hello", true), expected);
  const Ids plain = tok.encode("<s>Hello");
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 1), 0) << show(plain);
  Ids both = tok.encode("a");
  both.push_back(2);
  const Ids b = tok.encode("b");
  both.insert(both.end(), b.begin(), b.end());
  EXPECT_EQ(tok.encode("a</s>b", true), both);
  EXPECT_EQ(tok.encode("Hello", true), hello);
}

// Every reference string survives decode(encode(s)). That holds in
// SentencePiece for this vocabulary because it has byte fallback (nothing
// becomes <unk>) and its normaliser is the identity (no whitespace is
// collapsed); only the one space that add_space_prefix inserted is dropped.
// The exceptions in SentencePiece would be text containing U+2581 itself
// (it decodes as a space), unknown characters in a vocabulary without byte
// fallback, and invalid UTF-8 (SentencePiece decodes it as U+FFFD; we keep
// the raw bytes). None of the reference strings has any of these.
TEST(TokenizerLlamaSpm, ReferenceStringsRoundTrip) {
  KVG_REQUIRE_TEST_DATA(kLlamaSpm);
  KVG_REQUIRE_TEST_DATA(kLlamaSpmInp);
  KVG_REQUIRE_TEST_DATA(kLlamaSpmOut);
  const Tokenizer& tok = llama_spm();
  const std::vector<VectorCase> cases = read_vectors();
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(tok.decode(cases[i].ids), cases[i].text) << "vector " << i;
    Ids with_bos = cases[i].ids;
    with_bos.insert(with_bos.begin(), tok.bos());
    EXPECT_EQ(tok.decode(with_bos), cases[i].text) << "vector " << i << " after BOS";
  }
}

std::string random_utf8(std::mt19937& rng, size_t chars, bool ascii_only) {
  std::string s;
  std::uniform_int_distribution<int> kind(0, 9), ascii(0, 127);
  std::uniform_int_distribution<uint32_t> two(0x80, 0x7FF), three(0x800, 0xFFFF), four(0x10000, 0x10FFFF);
  for (size_t i = 0; i < chars; ++i) {
    const int k = ascii_only ? 0 : kind(rng);
    uint32_t cp;
    if (k <= 4) cp = static_cast<uint32_t>(k == 4 ? ' ' : ascii(rng));
    else if (k <= 6) cp = two(rng);
    else if (k <= 8) cp = three(rng);
    else cp = four(rng);
    // Surrogates are not characters; U+2581 is SentencePiece's own space.
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp == 0x2581) cp = 'x';
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xE0 | (cp >> 12));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (cp >> 18));
      s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return s;
}

TEST(TokenizerLlamaSpm, RandomTextRoundTrips) {
  KVG_REQUIRE_TEST_DATA(kLlamaSpm);
  const Tokenizer& tok = llama_spm();
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<size_t> length(0, 80);
  for (int i = 0; i < 300; ++i) {
    const std::string s = random_utf8(rng, length(rng), /*ascii_only=*/i % 2 == 0);
    const Ids ids = tok.encode(s);
    ASSERT_EQ(tok.decode(ids), s) << "case " << i << " " << escape(s) << "\n  ids" << show(ids);
    for (const int32_t id : ids)
      ASSERT_NE(tok.vocabulary().types[id], TokenType::Control) << "case " << i << " " << escape(s);
  }
  // Invalid UTF-8 goes through byte tokens and comes back as the same bytes.
  std::uniform_int_distribution<int> byte(0, 255);
  for (int i = 0; i < 100; ++i) {
    std::string s;
    for (size_t n = length(rng); n > 0; --n) s += static_cast<char>(byte(rng));
    ASSERT_EQ(tok.decode(tok.encode(s)), s) << "bytes case " << i << " " << escape(s);
  }
}

// 200 KB: the priority-queue merge does this in tens of milliseconds, while
// rescanning for the best pair after every merge (quadratic) would take
// minutes. Runs of one character are the worst case for stale queue entries.
TEST(TokenizerLlamaSpm, LongTextEncodesAndRoundTrips) {
  KVG_REQUIRE_TEST_DATA(kLlamaSpm);
  KVG_REQUIRE_TEST_DATA(kLlamaSpmInp);
  KVG_REQUIRE_TEST_DATA(kLlamaSpmOut);
  const Tokenizer& tok = llama_spm();
  const std::vector<VectorCase> cases = read_vectors();
  std::mt19937 rng(7);
  std::string text;
  while (text.size() < 200000) {
    text += cases[rng() % cases.size()].text;
    text += random_utf8(rng, 40, /*ascii_only=*/false);
    text += ' ';
  }
  const std::vector<std::string> texts = {text, std::string(200000, ' '), std::string(200000, 'a'),
                                          std::string(200000, '3')};
  for (const std::string& s : texts) {
    const Ids ids = tok.encode(s);
    EXPECT_GT(ids.size(), 0u);
    EXPECT_LE(ids.size(), s.size() + 1);
    EXPECT_TRUE(tok.decode(ids) == s) << "long text of " << s.size() << " bytes starting "
                                      << escape(s.substr(0, 40)) << " did not round-trip";
  }
  // Digits are single tokens in this vocabulary, so a run of them is too.
  EXPECT_EQ(tok.encode(std::string(200000, '3')).size(), 200001u);
}

// ------------------------------------------------------ the test models

TEST(TokenizerModels, Stories260K) {
  KVG_REQUIRE_TEST_DATA(test::kStories260K);
  const Tokenizer tok = load(test::kStories260K);
  ASSERT_EQ(tok.size(), 512u);
  EXPECT_EQ(tok.bos(), 1);
  EXPECT_EQ(tok.eos(), 2);
  EXPECT_TRUE(tok.add_bos());  // no add_bos_token key: the default
  const auto& types = tok.vocabulary().types;
  EXPECT_EQ(std::count(types.begin(), types.end(), TokenType::Byte), 256);
  EXPECT_EQ(std::count(types.begin(), types.end(), TokenType::Control), 2);
  EXPECT_EQ(std::count(types.begin(), types.end(), TokenType::Unknown), 1);

  const Ids ids = tok.encode("Once upon a time");
  EXPECT_EQ(ids, (Ids{403, 407, 261, 378})) << show(ids);  // ▁Once ▁upon ▁a ▁time
  EXPECT_EQ(tok.decode(ids), "Once upon a time");
  // The model's greedy output from BOS starts with these ten ids. The
  // text of the whole 60-token greedy run begins " Once upon a time, there
  // was a little girl": the ten ids stop at "▁g", and the leading space is the
  // piece's own ▁ that decoding after BOS drops.
  const Ids greedy = {403, 407, 261, 378, 432, 383, 286, 261, 376, 298};
  EXPECT_EQ(tok.decode(greedy), "Once upon a time, there was a little g");
  Ids with_bos = greedy;
  with_bos.insert(with_bos.begin(), tok.bos());
  EXPECT_EQ(tok.decode(with_bos), "Once upon a time, there was a little g");
  EXPECT_EQ(tok.decode_piece(403, 432), " Once");  // mid-text the space stays
  // Byte fallback: characters outside the 512 pieces round-trip through bytes.
  const std::string text = "Once upon a time \xE2\x9C\x85 \xF0\x9F\xA6\x99 caf\xC3\xA9\n";
  EXPECT_EQ(tok.decode(tok.encode(text)), text);
}

TEST(TokenizerModels, TinyStories656K) {
  KVG_REQUIRE_TEST_DATA(test::kTinyStories656K);
  const Tokenizer tok = load(test::kTinyStories656K);
  ASSERT_EQ(tok.size(), 2048u);
  EXPECT_EQ(tok.bos(), 1);
  EXPECT_EQ(tok.eos(), 2);
  EXPECT_EQ(tok.vocabulary().unk, 0);
  const auto& v = tok.vocabulary();
  EXPECT_EQ(std::count(v.types.begin(), v.types.end(), TokenType::Byte), 0);
  EXPECT_EQ(std::count(v.types.begin(), v.types.end(), TokenType::Control), 3);  // <unk> is typed control here
  EXPECT_TRUE(std::all_of(v.scores.begin(), v.scores.end(), [](float s) { return s == -1000.0f; }));
  EXPECT_EQ(v.pieces[1], "<|start_story|>");

  // Greedy reference ids from BOS: On|ce▁|upon▁a▁tim|e,▁|there▁was▁a▁|little▁girl▁named▁
  const Ids six = {147, 201, 282, 215, 286, 598};
  EXPECT_EQ(tok.decode(six), "Once upon a time, there was a little girl named ");
  EXPECT_EQ(tok.decode({1, 147, 201, 282, 215, 286, 598, 1662, 356, 499, 826}),
            "Once upon a time, there was a little girl named Lily. She had a toy car ");

  // Every score is equal, so how text splits is arbitrary (leftmost merges
  // first) and need not match the model's training; it must still be lossless
  // for characters the vocabulary has.
  const std::string story = "Once upon a time, there was a little girl named Lily.\nShe had a toy car.";
  EXPECT_EQ(tok.decode(tok.encode(story)), story);
  // No byte tokens: an unknown character becomes <unk>, which this vocabulary
  // marks as a control token, so it decodes to nothing.
  EXPECT_EQ(tok.encode("\xC3\xA9"), (Ids{80, 0})) << show(tok.encode("\xC3\xA9"));  // ▁ then <unk>
  EXPECT_EQ(tok.decode(tok.encode("caf\xC3\xA9")), "caf");
}

}  // namespace
}  // namespace kvg
