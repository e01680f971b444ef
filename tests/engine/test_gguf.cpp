// GGUF reader, writer and synthetic model generator.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>

#include "engine/gguf/gguf_file.hpp"
#include "kernels/cpu/float16.hpp"
#include "tests/support/data_paths.hpp"
#include "tests/support/synth_fixture.hpp"
#include "tools/gguf_writer.hpp"
#include "tools/synth_model.hpp"

namespace kvg {
namespace {

using gguf::File;
using gguf::Layout;
using gguf::TensorType;
using gguf::ValueType;
using gguf::Writer;

// ---------------------------------------------------------------- helpers

std::string tmp() {
  static const std::string dir = test::temp_dir("gguf");
  return dir;
}

std::string write_file(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = tmp() + "/" + name;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  EXPECT_TRUE(f.good()) << path;
  return path;
}

template <class T>
void patch(std::vector<uint8_t>& bytes, uint64_t at, T v) {
  ASSERT_LE(at + sizeof(T), bytes.size());
  std::memcpy(bytes.data() + at, &v, sizeof(T));
}

// Opens the bytes as a file and expects kvg::Error whose message contains `what`.
void expect_rejected(const std::vector<uint8_t>& bytes, const std::string& what,
                     std::optional<ErrorCode> code = ErrorCode::Corrupt) {
  const std::string path = write_file("hostile.gguf", bytes);
  try {
    File::open(path);
    ADD_FAILURE() << "accepted a file that should fail with '" << what << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << "message: " << e.what();
    if (code) {
      EXPECT_EQ(e.code(), *code) << e.what();
    }
  }
}

template <class T>
std::vector<T> typed(const gguf::TensorInfo& t) {
  std::vector<T> v(t.n_bytes / sizeof(T));
  std::memcpy(v.data(), t.data, v.size() * sizeof(T));
  return v;
}

std::vector<uint8_t> ramp(size_t n, uint8_t start = 0) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(start + i * 7);
  return v;
}

// A small valid file with something of each kind to corrupt.
Writer small_writer() {
  Writer w;
  w.set_alignment(32);
  w.add_string("general.architecture", "llama");
  w.add_u32("llama.block_count", 2);
  w.add_bool("flag", true);
  const std::vector<float> scores = {0.5f, -1.0f, 2.0f};
  w.add_array("tokenizer.ggml.scores", std::span<const float>(scores));
  const std::vector<std::string> tokens = {"<unk>", "a", "bc"};
  w.add_array("tokenizer.ggml.tokens", std::span<const std::string>(tokens));
  w.add_tensor("a.weight", {8, 2}, TensorType::F32, ramp(64));
  w.add_tensor("b.weight", {32, 2}, TensorType::Q8_0, ramp(68, 3));
  w.add_tensor("c.weight", {4}, TensorType::F16, ramp(8, 5));
  return w;
}

std::vector<uint8_t> small_file(Layout* layout) { return small_writer().serialize(layout); }

// ---------------------------------------------------------------- test models

// What a golden file's header and directory say.
struct GoldenLayout {
  uint64_t size, n_metadata, n_tensors, data_offset;
};

void expect_layout(const File& f, const GoldenLayout& g) {
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.bytes().size(), g.size);
  EXPECT_EQ(f.metadata().size(), g.n_metadata);
  EXPECT_EQ(f.tensors().size(), g.n_tensors);
  EXPECT_EQ(f.data_offset(), g.data_offset);
}

// A llama file's hyperparameters, as its metadata states them.
struct LlamaShape {
  uint64_t context, embd, ff, blocks, heads, heads_kv, rope_dims;
  uint64_t kv_width() const { return embd / heads * heads_kv; }
};

void expect_llama_shape(const File& f, const LlamaShape& s) {
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_uint("llama.context_length"), s.context);
  EXPECT_EQ(f.get_uint("llama.embedding_length"), s.embd);
  EXPECT_EQ(f.get_uint("llama.feed_forward_length"), s.ff);
  EXPECT_EQ(f.get_uint("llama.block_count"), s.blocks);
  EXPECT_EQ(f.get_uint("llama.attention.head_count"), s.heads);
  EXPECT_EQ(f.get_uint("llama.attention.head_count_kv"), s.heads_kv);
  EXPECT_EQ(f.get_uint("llama.rope.dimension_count"), s.rope_dims);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
}

// The tokenizer's three arrays.
struct Vocabulary {
  std::vector<std::string_view> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
};

// Reads them into v, asserting each holds n entries (callers wrap it in
// ASSERT_NO_FATAL_FAILURE, so nothing indexes a short array).
void read_vocabulary(const File& f, size_t n, Vocabulary& v) {
  v = {f.get_string_array("tokenizer.ggml.tokens"), f.get_f32_array("tokenizer.ggml.scores"),
       f.get_i32_array("tokenizer.ggml.token_type")};
  ASSERT_EQ(v.tokens.size(), n);
  ASSERT_EQ(v.scores.size(), n);
  ASSERT_EQ(v.types.size(), n);
}

// A llama (SentencePiece) vocabulary's head: <unk>, <s>, </s>, then the 256
// byte tokens <0x00> .. <0xFF>.
void expect_byte_tokens(const Vocabulary& v) {
  ASSERT_GE(v.tokens.size(), 259u);
  EXPECT_EQ(v.tokens[0], "<unk>");
  EXPECT_EQ(v.tokens[1], "<s>");
  EXPECT_EQ(v.tokens[2], "</s>");
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    EXPECT_EQ(v.tokens[size_t(3 + b)], name);
  }
}

using ExpectedTensors = std::map<std::string, std::pair<TensorType, std::vector<uint64_t>>>;

// Every tensor of a llama file of shape s: matrices of one type, norms F32,
// and output.weight unless the output is tied to the embeddings.
ExpectedTensors llama_tensors(const LlamaShape& s, TensorType matrices, uint64_t vocab, bool tied_output) {
  ExpectedTensors expected = {{"token_embd.weight", {matrices, {s.embd, vocab}}},
                              {"output_norm.weight", {TensorType::F32, {s.embd}}}};
  if (!tied_output) expected["output.weight"] = {matrices, {s.embd, vocab}};
  for (uint64_t l = 0; l < s.blocks; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    expected[p + "attn_q.weight"] = {matrices, {s.embd, s.embd}};
    expected[p + "attn_k.weight"] = {matrices, {s.embd, s.kv_width()}};
    expected[p + "attn_v.weight"] = {matrices, {s.embd, s.kv_width()}};
    expected[p + "attn_output.weight"] = {matrices, {s.embd, s.embd}};
    expected[p + "ffn_gate.weight"] = {matrices, {s.embd, s.ff}};
    expected[p + "ffn_up.weight"] = {matrices, {s.embd, s.ff}};
    expected[p + "ffn_down.weight"] = {matrices, {s.ff, s.embd}};
    expected[p + "attn_norm.weight"] = {TensorType::F32, {s.embd}};
    expected[p + "ffn_norm.weight"] = {TensorType::F32, {s.embd}};
  }
  return expected;
}

struct TensorTotals {
  uint64_t params = 0, bytes = 0, end = 0;  // end: one past the last tensor byte
  std::map<TensorType, int> per_type;
};

// Checks that f holds exactly the expected tensors (name, type, shape), each
// of its type's size and where its offset says; returns their totals.
TensorTotals expect_tensors(const File& f, ExpectedTensors expected) {
  TensorTotals totals;
  for (const auto& t : f.tensors()) {
    const auto it = expected.find(t.name);
    if (it == expected.end()) {
      ADD_FAILURE() << "unexpected tensor " << t.name;
      continue;
    }
    EXPECT_EQ(t.type, it->second.first) << t.name;
    EXPECT_EQ(t.ne, it->second.second) << t.name;
    EXPECT_EQ(t.n_bytes, t.type == TensorType::Q8_0 ? t.n_elements / 32 * 34 : t.n_elements * 4) << t.name;
    EXPECT_EQ(uint64_t(t.data - f.bytes().data()), f.data_offset() + t.offset) << t.name;
    totals.params += t.n_elements;
    totals.bytes += t.n_bytes;
    totals.end = std::max(totals.end, f.data_offset() + t.offset + t.n_bytes);
    ++totals.per_type[t.type];
    expected.erase(it);
  }
  for (const auto& [name, _] : expected) ADD_FAILURE() << "missing tensor " << name;
  return totals;
}

TEST(GgufShared, Stories260K) {
  KVG_REQUIRE_TEST_DATA(test::kStories260K);
  auto f = File::open(test::data_path(test::kStories260K));
  expect_layout(*f, {.size = 1185376, .n_metadata = 19, .n_tensors = 48, .data_offset = 14176});
  const LlamaShape shape{.context = 2048, .embd = 64, .ff = 172, .blocks = 5, .heads = 8, .heads_kv = 4, .rope_dims = 8};
  expect_llama_shape(*f, shape);

  EXPECT_EQ(f->get_string("general.name"), "llama");
  EXPECT_EQ(f->find("general.license"), nullptr);
  EXPECT_EQ(f->find("general.file_type"), nullptr);
  EXPECT_FALSE(f->opt_float("llama.rope.freq_base").has_value());
  EXPECT_EQ(float(f->get_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);

  Vocabulary v;
  ASSERT_NO_FATAL_FAILURE(read_vocabulary(*f, 512, v));
  expect_byte_tokens(v);
  EXPECT_EQ(*std::max_element(v.scores.begin(), v.scores.end()), 0.0f);
  EXPECT_EQ(*std::min_element(v.scores.begin(), v.scores.end()), -252.0f);
  std::map<int32_t, int> type_count;
  for (int32_t t : v.types) ++type_count[t];
  EXPECT_EQ(type_count, (std::map<int32_t, int>{{1, 253}, {2, 1}, {3, 2}, {6, 256}}));
  const std::map<std::string, uint64_t> special_ids = {
      {"unknown", 0}, {"bos", 1}, {"eos", 2}, {"seperator", 0xFFFFFFFFu}, {"padding", 0xFFFFFFFFu}};
  for (const auto& [which, id] : special_ids) EXPECT_EQ(f->get_uint("tokenizer.ggml." + which + "_token_id"), id) << which;
  EXPECT_FALSE(f->opt_bool("tokenizer.ggml.add_bos_token").has_value());
  EXPECT_EQ(f->find("tokenizer.ggml.merges"), nullptr);

  const TensorTotals totals = expect_tensors(*f, llama_tensors(shape, TensorType::F32, 512, /*tied_output=*/false));
  EXPECT_EQ(totals.params, 292800u);
  EXPECT_EQ(totals.bytes, 1171200u);
  EXPECT_EQ(totals.end, f->bytes().size());
  ASSERT_NE(f->find_tensor("output.weight"), nullptr);
  EXPECT_EQ(f->find_tensor("blk.5.attn_q.weight"), nullptr);
  EXPECT_EQ(f->find_tensor("token_embd.weight")->offset, 0u);
}

TEST(GgufShared, TinyStories656K) {
  KVG_REQUIRE_TEST_DATA(test::kTinyStories656K);
  auto f = File::open(test::data_path(test::kTinyStories656K));
  expect_layout(*f, {.size = 749728, .n_metadata = 34, .n_tensors = 20, .data_offset = 50848});
  const LlamaShape shape{.context = 512, .embd = 128, .ff = 384, .blocks = 2, .heads = 8, .heads_kv = 4, .rope_dims = 16};
  expect_llama_shape(*f, shape);

  EXPECT_EQ(f->get_string("general.name"), "Raincandy U TinyStories 656K");
  EXPECT_EQ(f->get_string("general.license"), "apache-2.0");
  EXPECT_EQ(f->get_uint("general.file_type"), 7u);
  EXPECT_EQ(f->get_uint("general.quantization_version"), 2u);
  EXPECT_EQ(f->get_float("llama.rope.freq_base"), 10000.0);
  EXPECT_EQ(float(f->get_float("llama.attention.layer_norm_rms_epsilon")), 1e-6f);
  EXPECT_EQ(f->get_uint("llama.vocab_size"), 2048u);
  const auto languages = f->get_string_array("general.languages");
  ASSERT_EQ(languages.size(), 1u);
  EXPECT_EQ(languages[0], "en");

  EXPECT_EQ(f->get_string("tokenizer.ggml.pre"), "default");
  Vocabulary v;
  ASSERT_NO_FATAL_FAILURE(read_vocabulary(*f, 2048, v));
  EXPECT_EQ(v.tokens[1], "<|start_story|>");
  EXPECT_EQ(v.tokens[2], "<|end_story|>");
  EXPECT_TRUE(std::all_of(v.scores.begin(), v.scores.end(), [](float s) { return s == -1000.0f; }));
  EXPECT_EQ(std::count(v.types.begin(), v.types.end(), 1), 2045);
  EXPECT_EQ(std::count(v.types.begin(), v.types.end(), 3), 3);
  const std::map<std::string, uint64_t> special_ids = {{"bos", 1}, {"eos", 2}, {"unknown", 0}, {"padding", 0}};
  for (const auto& [which, id] : special_ids) EXPECT_EQ(f->get_uint("tokenizer.ggml." + which + "_token_id"), id) << which;
  EXPECT_EQ(f->opt_bool("tokenizer.ggml.add_bos_token"), std::optional<bool>(true));
  EXPECT_EQ(f->opt_bool("tokenizer.ggml.add_eos_token"), std::optional<bool>(false));

  EXPECT_EQ(f->find_tensor("output.weight"), nullptr);  // tied to token_embd
  const TensorTotals totals = expect_tensors(*f, llama_tensors(shape, TensorType::Q8_0, 2048, /*tied_output=*/true));
  EXPECT_EQ(totals.per_type, (std::map<TensorType, int>{{TensorType::Q8_0, 15}, {TensorType::F32, 5}}));
  EXPECT_EQ(totals.params, 656000u);
  EXPECT_EQ(totals.bytes, 698880u);
  EXPECT_EQ(totals.end, f->bytes().size());
  EXPECT_EQ(f->find_tensor("token_embd.weight")->n_bytes, 128u * 2048 / 32 * 34);
}

TEST(GgufShared, VocabularyOnly) {
  const char* rel = "tokenizer-vectors/ggml-vocab-llama-spm.gguf";
  KVG_REQUIRE_TEST_DATA(rel);
  auto f = File::open(test::data_path(rel));
  EXPECT_EQ(f->version(), 3u);
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_EQ(f->metadata().size(), 22u);
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").size(), 32000u);
  EXPECT_EQ(f->get_f32_array("tokenizer.ggml.scores").size(), 32000u);
  EXPECT_EQ(f->get_i32_array("tokenizer.ggml.token_type").size(), 32000u);
  EXPECT_EQ(f->opt_bool("tokenizer.ggml.add_bos_token"), std::optional<bool>(true));
}

// ---------------------------------------------------------------- writer round trip

TEST(GgufWriter, EveryValueType) {
  Writer w;
  w.add_u8("u8", 255);
  w.add_i8("i8", -128);
  w.add_u16("u16", 65535);
  w.add_i16("i16", -32768);
  w.add_u32("u32", 4000000000u);
  w.add_i32("i32", -2000000000);
  w.add_u64("u64", std::numeric_limits<uint64_t>::max());
  w.add_i64("i64", std::numeric_limits<int64_t>::min());
  w.add_f32("f32", 0.1f);
  w.add_f64("f64", 0.1);
  w.add_bool("bool.t", true);
  w.add_bool("bool.f", false);
  w.add_string("str", "h\xc3\xa9llo \xe2\x96\x81world");
  w.add_string("str.empty", "");
  w.add_i32("i32.positive", 7);
  w.add_i64("i64.negative", -1);

  const std::vector<uint8_t> a_u8 = {0, 1, 255};
  const std::vector<int8_t> a_i8 = {-128, 0, 127};
  const std::vector<uint16_t> a_u16 = {0, 65535};
  const std::vector<int16_t> a_i16 = {-32768, 32767};
  const std::vector<uint32_t> a_u32 = {1, 2, 0x7fffffff};
  const std::vector<uint32_t> a_u32_big = {1, 0x80000000u};
  const std::vector<int32_t> a_i32 = {-1, 0, 1, std::numeric_limits<int32_t>::min()};
  const std::vector<uint64_t> a_u64 = {std::numeric_limits<uint64_t>::max()};
  const std::vector<int64_t> a_i64 = {std::numeric_limits<int64_t>::min(), 5};
  const std::vector<float> a_f32 = {1.5f, -0.0f, std::numeric_limits<float>::infinity()};
  const std::vector<double> a_f64 = {1e300, -2.5};
  const std::array<bool, 3> a_bool = {true, false, true};
  const std::vector<std::string> a_str = {"", "x", "\xe2\x96\x81the", std::string(1000, 'z')};
  const std::vector<float> a_empty;
  w.add_array("a.u8", std::span<const uint8_t>(a_u8));
  w.add_array("a.i8", std::span<const int8_t>(a_i8));
  w.add_array("a.u16", std::span<const uint16_t>(a_u16));
  w.add_array("a.i16", std::span<const int16_t>(a_i16));
  w.add_array("a.u32", std::span<const uint32_t>(a_u32));
  w.add_array("a.u32.big", std::span<const uint32_t>(a_u32_big));
  w.add_array("a.i32", std::span<const int32_t>(a_i32));
  w.add_array("a.u64", std::span<const uint64_t>(a_u64));
  w.add_array("a.i64", std::span<const int64_t>(a_i64));
  w.add_array("a.f32", std::span<const float>(a_f32));
  w.add_array("a.f64", std::span<const double>(a_f64));
  w.add_array("a.bool", std::span<const bool>(a_bool));
  w.add_array("a.str", std::span<const std::string>(a_str));
  w.add_array("a.empty", std::span<const float>(a_empty));

  Layout layout;
  const std::string path = write_file("values.gguf", w.serialize(&layout));
  auto f = File::open(path);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->metadata().size(), 30u);
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_EQ(layout.file_size, f->bytes().size());
  EXPECT_EQ(layout.keys.size(), 30u);
  EXPECT_EQ(layout.key("u32").type_at + 4, layout.key("u32").value_at);

  EXPECT_EQ(f->find("u8")->type, ValueType::U8);
  EXPECT_EQ(f->get_uint("u8"), 255u);
  EXPECT_EQ(f->find("i8")->i, -128);
  EXPECT_EQ(f->get_uint("u16"), 65535u);
  EXPECT_EQ(f->find("i16")->i, -32768);
  EXPECT_EQ(f->get_uint("u32"), 4000000000u);
  EXPECT_EQ(f->find("i32")->i, -2000000000);
  EXPECT_EQ(f->get_uint("u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f->find("i64")->i, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f->get_float("f32"), double(0.1f));
  EXPECT_EQ(f->get_float("f64"), 0.1);
  EXPECT_EQ(f->opt_bool("bool.t"), std::optional<bool>(true));
  EXPECT_EQ(f->opt_bool("bool.f"), std::optional<bool>(false));
  EXPECT_EQ(f->get_string("str"), "h\xc3\xa9llo \xe2\x96\x81world");
  EXPECT_EQ(f->get_string("str.empty"), "");
  EXPECT_EQ(f->get_uint("i32.positive"), 7u);  // any integer type whose value fits

  auto array_of = [&](const char* key, ValueType t, uint64_t n) {
    const gguf::Value* v = f->find(key);
    ASSERT_NE(v, nullptr) << key;
    EXPECT_EQ(v->type, ValueType::ARRAY) << key;
    EXPECT_EQ(v->array_type, t) << key;
    EXPECT_EQ(v->array_count, n) << key;
  };
  array_of("a.u8", ValueType::U8, 3);
  array_of("a.i8", ValueType::I8, 3);
  array_of("a.u16", ValueType::U16, 2);
  array_of("a.i16", ValueType::I16, 2);
  array_of("a.u64", ValueType::U64, 1);
  array_of("a.i64", ValueType::I64, 2);
  array_of("a.f64", ValueType::F64, 2);
  array_of("a.bool", ValueType::BOOL, 3);
  EXPECT_EQ(std::memcmp(f->find("a.i16")->array_data, a_i16.data(), 4), 0);
  EXPECT_EQ(std::memcmp(f->find("a.u64")->array_data, a_u64.data(), 8), 0);
  EXPECT_EQ(std::memcmp(f->find("a.f64")->array_data, a_f64.data(), 16), 0);
  EXPECT_EQ(f->find("a.bool")->array_data[0], 1);
  EXPECT_EQ(f->find("a.bool")->array_data[1], 0);

  EXPECT_EQ(f->get_i32_array("a.i32"), a_i32);
  EXPECT_EQ(f->get_i32_array("a.u32"), (std::vector<int32_t>{1, 2, 0x7fffffff}));
  const auto f32s = f->get_f32_array("a.f32");
  ASSERT_EQ(f32s.size(), 3u);
  EXPECT_EQ(f32s[0], 1.5f);
  EXPECT_TRUE(std::signbit(f32s[1]));
  EXPECT_TRUE(std::isinf(f32s[2]));
  EXPECT_TRUE(f->get_f32_array("a.empty").empty());
  const auto strs = f->get_string_array("a.str");
  ASSERT_EQ(strs.size(), a_str.size());
  for (size_t i = 0; i < strs.size(); ++i) EXPECT_EQ(strs[i], a_str[i]);

  // absent keys
  EXPECT_FALSE(f->opt_string("nope").has_value());
  EXPECT_FALSE(f->opt_uint("nope").has_value());
  EXPECT_FALSE(f->opt_float("nope").has_value());
  EXPECT_FALSE(f->opt_bool("nope").has_value());
  auto throws_with = [](auto&& fn, const std::string& what) {
    try {
      fn();
      ADD_FAILURE() << "no error, expected '" << what << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Corrupt);
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  throws_with([&] { f->get_string("nope"); }, "required key 'nope' is missing");
  throws_with([&] { f->get_uint("nope"); }, "'nope' is missing");
  throws_with([&] { f->get_f32_array("nope"); }, "'nope' is missing");
  // wrong types for the typed getters
  throws_with([&] { f->get_string("u32"); }, "key 'u32' has type u32, expected string");
  throws_with([&] { f->opt_string("u32"); }, "key 'u32' has type u32, expected string");
  throws_with([&] { f->get_uint("str"); }, "key 'str' has type string, expected an unsigned integer");
  throws_with([&] { f->get_uint("f32"); }, "key 'f32' has type f32");
  throws_with([&] { f->get_uint("bool.t"); }, "key 'bool.t' has type bool");
  throws_with([&] { f->get_uint("i64.negative"); }, "key 'i64.negative' = -1 is negative");
  throws_with([&] { f->get_float("u32"); }, "key 'u32' has type u32, expected f32 or f64");
  throws_with([&] { f->opt_bool("u8"); }, "key 'u8' has type u8, expected bool");
  throws_with([&] { f->get_string_array("a.f32"); }, "key 'a.f32' has type array of f32, expected array of string");
  throws_with([&] { f->get_f32_array("a.f64"); }, "key 'a.f64' has type array of f64, expected array of f32");
  throws_with([&] { f->get_f32_array("f32"); }, "key 'f32' has type f32, expected array of f32");
  throws_with([&] { f->get_i32_array("a.i64"); }, "key 'a.i64' has type array of i64");
  throws_with([&] { f->get_i32_array("a.u32.big"); }, "key 'a.u32.big' element 1 = 2147483648 does not fit in i32");
}

TEST(GgufWriter, TensorsAndAlignment) {
  for (uint32_t alignment : {32u, 64u, 4096u}) {
    Writer w;
    w.set_version(2);
    w.set_alignment(16);
    w.set_alignment(alignment);  // replaces the value, does not add a second key
    struct T { std::string name; std::vector<uint64_t> ne; TensorType type; uint64_t bytes; };
    const std::vector<T> ts = {
        {"f32", {3, 5}, TensorType::F32, 60},       {"f16", {7}, TensorType::F16, 14},
        {"bf16", {2, 2, 2}, TensorType::BF16, 16},  {"q4_0", {64, 3}, TensorType::Q4_0, 6 * 18},
        {"q4_1", {32}, TensorType::Q4_1, 20},       {"q5_0", {32}, TensorType::Q5_0, 22},
        {"q5_1", {32}, TensorType::Q5_1, 24},       {"q8_0", {32, 1, 1, 2}, TensorType::Q8_0, 68},
        {"q8_1", {32}, TensorType::Q8_1, 36},       {"q2_k", {256}, TensorType::Q2_K, 84},
        {"q3_k", {256}, TensorType::Q3_K, 110},     {"q4_k", {512}, TensorType::Q4_K, 288},
        {"q5_k", {256}, TensorType::Q5_K, 176},     {"q6_k", {256, 2}, TensorType::Q6_K, 420},
        {"q8_k", {256}, TensorType::Q8_K, 292},
    };
    for (size_t i = 0; i < ts.size(); ++i) {
      EXPECT_EQ(Writer::tensor_bytes(ts[i].ne, ts[i].type), ts[i].bytes) << ts[i].name;
      w.add_tensor(ts[i].name, ts[i].ne, ts[i].type, ramp(ts[i].bytes, uint8_t(i)));
    }
    const std::string path = tmp() + "/tensors.gguf";
    const Layout layout = w.write(path);
    auto f = File::open(path);
    EXPECT_EQ(f->version(), 2u);
    EXPECT_EQ(f->alignment(), alignment);
    EXPECT_EQ(f->metadata().size(), 1u);
    EXPECT_EQ(f->get_uint("general.alignment"), alignment);
    EXPECT_EQ(f->data_offset() % alignment, 0u);
    EXPECT_EQ(f->data_offset(), layout.data_offset);
    EXPECT_EQ(f->bytes().size(), layout.file_size);
    ASSERT_EQ(f->tensors().size(), ts.size());
    for (size_t i = 0; i < ts.size(); ++i) {
      const gguf::TensorInfo& t = f->tensors()[i];
      EXPECT_EQ(t.name, ts[i].name);
      EXPECT_EQ(t.ne, ts[i].ne);
      EXPECT_EQ(t.type, ts[i].type);
      EXPECT_EQ(t.n_bytes, ts[i].bytes);
      EXPECT_EQ(t.offset % alignment, 0u);
      EXPECT_EQ(uint64_t(t.data - f->bytes().data()), layout.tensors[i].data_at);
      const auto want = ramp(ts[i].bytes, uint8_t(i));
      EXPECT_EQ(std::memcmp(t.data, want.data(), want.size()), 0) << t.name;
    }
  }
}

TEST(GgufWriter, RejectsBadTensorsAndCleansUp) {
  Writer w;
  auto invalid = [](auto&& fn, const std::string& what) {
    try {
      fn();
      ADD_FAILURE() << "no error, expected '" << what << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  invalid([&] { w.add_tensor("x", {4}, TensorType::F32, ramp(15)); }, "tensor 'x': 15 bytes given, shape needs 16");
  invalid([&] { w.add_tensor("x", {31}, TensorType::Q8_0, ramp(34)); },
          "tensor 'x': ne[0] = 31 is not a multiple of the Q8_0 block size 32");
  invalid([&] { w.add_tensor("x", {2, 0}, TensorType::F32, ramp(0)); }, "tensor 'x': zero dimension ne[1]");
  invalid([&] { w.add_tensor("x", {1, 1, 1, 1, 1}, TensorType::F32, ramp(4)); }, "tensor 'x' needs 1..4 dimensions");
  invalid([&] { w.add_tensor("x", {4}, TensorType(4), ramp(4)); }, "tensor 'x': unknown tensor type 4");
  invalid([&] { w.set_alignment(48); }, "alignment 48 is not a power of two");
  invalid([&] { w.set_version(1); }, "version 1");

  // A producer that stops short fails the write and leaves no file behind.
  Writer s;
  s.add_tensor("short", {8}, TensorType::F32, [](gguf::TensorSink& sink) {
    const float x[4] = {};
    sink.write(x, sizeof x);
  });
  const std::string path = tmp() + "/short.gguf";
  invalid([&] { s.write(path); }, "tensor 'short': producer wrote 16 of 32 bytes");
  EXPECT_FALSE(std::filesystem::exists(path));
  for (const auto& e : std::filesystem::directory_iterator(tmp()))
    EXPECT_EQ(e.path().filename().string().find("short.gguf.tmp"), std::string::npos) << e.path();

  Writer l;
  l.add_tensor("long", {2}, TensorType::F32, [](gguf::TensorSink& sink) {
    const float x[3] = {};
    sink.write(x, sizeof x);
  });
  invalid([&] { l.serialize(); }, "tensor 'long': producer wrote more than its 8 bytes");
}

// ---------------------------------------------------------------- synthetic models

SynthOptions tiny(const std::string& type) {
  SynthOptions o = test::small_synth_options();
  o.type = type;
  o.seed = 42;
  o.rope_base = 500000;
  return o;
}

TEST(GgufSynth, RoundTrip) {
  for (const std::string type : {"f32", "f16", "q8_0"}) {
    SCOPED_TRACE(type);
    const SynthOptions o = tiny(type);
    const std::string path = tmp() + "/synth-" + type + ".gguf";
    write_synth_model(o, path);
    auto f = File::open(path);
    EXPECT_EQ(f->version(), 3u);
    expect_llama_shape(*f, {.context = 128, .embd = 64, .ff = 96, .blocks = 2, .heads = 4, .heads_kv = 2, .rope_dims = 16});
    EXPECT_FALSE(f->get_string("general.name").empty());
    EXPECT_EQ(f->get_uint("general.file_type"), type == "f32" ? 0u : type == "f16" ? 1u : 7u);
    EXPECT_EQ(f->get_float("llama.rope.freq_base"), 500000.0);
    EXPECT_EQ(float(f->get_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
    EXPECT_EQ(f->get_uint("llama.vocab_size"), 300u);

    Vocabulary v;
    ASSERT_NO_FATAL_FAILURE(read_vocabulary(*f, 300, v));
    expect_byte_tokens(v);
    EXPECT_EQ(v.tokens[259], "\xe2\x96\x81");
    const std::vector<int32_t> head_types = {2, 3, 3};
    EXPECT_TRUE(std::equal(head_types.begin(), head_types.end(), v.types.begin()));
    EXPECT_EQ(std::count(v.types.begin() + 3, v.types.begin() + 259, 6), 256);
    EXPECT_EQ(std::count(v.types.begin() + 259, v.types.end(), 1), 300 - 259);
    EXPECT_EQ(std::set<std::string_view>(v.tokens.begin(), v.tokens.end()).size(), 300u);
    const std::map<std::string, uint64_t> special_ids = {{"bos", 1}, {"eos", 2}, {"unknown", 0}};
    for (const auto& [which, id] : special_ids) EXPECT_EQ(f->get_uint("tokenizer.ggml." + which + "_token_id"), id) << which;
    EXPECT_EQ(f->opt_bool("tokenizer.ggml.add_bos_token"), std::optional<bool>(true));

    const auto expected = synth_tensors(o);
    ASSERT_EQ(f->tensors().size(), expected.size());
    ASSERT_EQ(expected.size(), 3u + 9u * 2);
    const TensorType mat = type == "f32" ? TensorType::F32 : type == "f16" ? TensorType::F16 : TensorType::Q8_0;
    for (size_t i = 0; i < expected.size(); ++i) {
      const gguf::TensorInfo& t = f->tensors()[i];
      const SynthTensor& e = expected[i];
      SCOPED_TRACE(t.name);
      EXPECT_EQ(t.name, e.name);
      EXPECT_EQ(t.ne, e.ne);
      EXPECT_EQ(t.type, e.norm ? TensorType::F32 : mat);
      double max_err = 0, max_abs = 0;
      for (uint64_t k = 0; k < t.n_elements; ++k) {
        const float want = synth_weight(o.seed, i, e, k);
        float got;
        if (t.type == TensorType::F32) {
          std::memcpy(&got, t.data + 4 * k, 4);
          ASSERT_EQ(got, want) << k;
        } else if (t.type == TensorType::F16) {
          uint16_t h;
          std::memcpy(&h, t.data + 2 * k, 2);
          ASSERT_EQ(h, f32_to_f16(want)) << k;
          got = f16_to_f32(h);
        } else {
          const uint8_t* block = t.data + (k / 32) * 34;
          uint16_t dh;
          std::memcpy(&dh, block, 2);
          const float d = f16_to_f32(dh);
          const int8_t q = int8_t(block[2 + k % 32]);
          ASSERT_GE(q, -127);
          got = d * float(q);
          // Rounding to the nearest step: off by at most half a step.
          ASSERT_LE(std::fabs(got - want), d * 0.5f * 1.0001f + 1e-12f) << k;
        }
        max_err = std::max(max_err, double(std::fabs(got - want)));
        max_abs = std::max(max_abs, double(std::fabs(want)));
      }
      if (e.norm) {
        EXPECT_GT(max_abs, 1.0);
        EXPECT_LE(max_abs, 1.0 + 1.0 / 16);
      } else {
        const double bound = 1.0 / std::sqrt(double(e.ne[0]));
        EXPECT_LE(max_abs, bound);
        EXPECT_GT(max_abs, 0.9 * bound);  // values do span the range
      }
      if (t.type == TensorType::F16) {
        EXPECT_LE(max_err, max_abs / 1024);
      }
      if (t.type == TensorType::Q8_0) {
        EXPECT_LE(max_err, max_abs / 127 * 0.51);
      }
    }
  }
}

TEST(GgufSynth, DeterministicAndSeeded) {
  const std::string a = tmp() + "/det-a.gguf", b = tmp() + "/det-b.gguf", c = tmp() + "/det-c.gguf";
  SynthOptions o = tiny("q8_0");
  write_synth_model(o, a);
  write_synth_model(o, b);
  o.seed = 43;
  write_synth_model(o, c);
  auto fa = File::open(a), fb = File::open(b), fc = File::open(c);
  ASSERT_EQ(fa->bytes().size(), fb->bytes().size());
  EXPECT_EQ(std::memcmp(fa->bytes().data(), fb->bytes().data(), fa->bytes().size()), 0);
  const auto* ta = fa->find_tensor("blk.1.ffn_down.weight");
  const auto* tc = fc->find_tensor("blk.1.ffn_down.weight");
  ASSERT_TRUE(ta && tc);
  EXPECT_NE(std::memcmp(ta->data, tc->data, ta->n_bytes), 0);
  // Different tensors of one model differ too (keyed by tensor index).
  const auto* q0 = fa->find_tensor("blk.0.attn_q.weight");
  const auto* q1 = fa->find_tensor("blk.1.attn_q.weight");
  EXPECT_NE(std::memcmp(q0->data, q1->data, q0->n_bytes), 0);
}

TEST(GgufSynth, VocabularyIsUniqueAtLlamaSize) {
  const SynthVocab v = synth_vocab(32000);
  ASSERT_EQ(v.pieces.size(), 32000u);
  EXPECT_EQ(std::set<std::string>(v.pieces.begin(), v.pieces.end()).size(), 32000u);
  for (size_t i = 260; i < v.pieces.size(); ++i) ASSERT_LT(v.scores[i], v.scores[i - 1]);
}

TEST(GgufSynth, EncodeQ8_0) {
  float x[64] = {};
  uint8_t out[68];
  encode_q8_0(x, 64, out);
  for (int b = 0; b < 2; ++b) {
    uint16_t d;
    std::memcpy(&d, out + 34 * b, 2);
    EXPECT_EQ(d, 0);
    for (int i = 0; i < 32; ++i) EXPECT_EQ(out[34 * b + 2 + i], 0);
  }
  // Values whose scale rounds down in f16 would reach 128 without the clamp.
  for (int i = 0; i < 32; ++i) x[i] = (i % 2 ? -1.0f : 1.0f) * (0.001f + 0.0001f * float(i));
  x[31] = -0.0123456f;
  encode_q8_0(x, 32, out);
  uint16_t dh;
  std::memcpy(&dh, out, 2);
  const float d = f16_to_f32(dh);
  EXPECT_NEAR(d, 0.0123456 / 127, 1e-6);
  for (int i = 0; i < 32; ++i) {
    const int8_t q = int8_t(out[2 + i]);
    EXPECT_GE(q, -127);
    EXPECT_LE(q, 127);
    EXPECT_LE(std::fabs(d * float(q) - x[i]), d * 0.5f + 1e-9f) << i;
  }
  EXPECT_EQ(int8_t(out[2 + 31]), -127);
  EXPECT_THROW(encode_q8_0(x, 31, out), Error);
}

TEST(GgufSynth, RejectsBadOptions) {
  auto bad = [](SynthOptions o, const std::string& what) {
    try {
      write_synth_model(o, tmp() + "/bad.gguf");
      ADD_FAILURE() << "no error, expected '" << what << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(tmp() + "/bad.gguf"));
  };
  SynthOptions o = tiny("f32");
  o.n_vocab = 258;
  bad(o, "n_vocab = 258");
  o = tiny("q4_0");
  bad(o, "type 'q4_0'");
  o = tiny("f32");
  o.n_head = 5;
  bad(o, "not a multiple of n_head");
  o = tiny("f32");
  o.n_head_kv = 3;
  bad(o, "not a multiple of n_head_kv");
  o = tiny("q8_0");
  o.n_ff = 100;
  bad(o, "multiples of 32");
  o = tiny("f32");
  o.n_layer = 0;
  bad(o, "n_layer = 0");
}

// ---------------------------------------------------------------- hostile files

TEST(GgufHostile, SmallFileIsValid) {
  Layout layout;
  const auto bytes = small_file(&layout);
  auto f = File::open(write_file("small.gguf", bytes));
  EXPECT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->metadata().size(), 6u);
  EXPECT_EQ(layout.tensors.size(), 3u);
}

TEST(GgufHostile, EveryTruncationThrows) {
  const auto bytes = small_file(nullptr);
  const std::string path = tmp() + "/prefix.gguf";
  for (size_t n = 0; n < bytes.size(); ++n) {
    {
      std::ofstream f(path, std::ios::binary | std::ios::trunc);
      f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(n));
    }
    try {
      File::open(path);
      ADD_FAILURE() << "prefix of " << n << " bytes accepted";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(e.code(), ErrorCode::Corrupt) << m;
      EXPECT_TRUE(m.find("truncated") != std::string::npos || m.find("past end") != std::string::npos ||
                  m.find("cannot fit") != std::string::npos || m.find("bytes follow") != std::string::npos)
          << "prefix " << n << ": " << m;
    }
  }
}

TEST(GgufHostile, Magic) {
  auto bytes = small_file(nullptr);
  bytes[0] = 'X';
  expect_rejected(bytes, "bad magic 'XGUF' (expected 'GGUF')");
  bytes[0] = 0;
  expect_rejected(bytes, "bad magic '\\x00GUF'");
}

TEST(GgufHostile, Version) {
  auto bytes = small_file(nullptr);
  patch<uint32_t>(bytes, Layout::kVersionAt, 1);
  expect_rejected(bytes, "version 1 is not supported", ErrorCode::Unsupported);
  patch<uint32_t>(bytes, Layout::kVersionAt, 99);
  expect_rejected(bytes, "unknown version 99", ErrorCode::Unsupported);
  patch<uint32_t>(bytes, Layout::kVersionAt, 0x03000000);
  expect_rejected(bytes, "big-endian", ErrorCode::Unsupported);
}

TEST(GgufHostile, Counts) {
  Layout layout;
  const auto good = small_file(&layout);
  auto bytes = good;
  patch<uint64_t>(bytes, Layout::kTensorCountAt, uint64_t(1) << 60);
  expect_rejected(bytes, "header claims 1152921504606846976 tensors");
  bytes = good;
  patch<uint64_t>(bytes, Layout::kKvCountAt, uint64_t(1) << 60);
  expect_rejected(bytes, "header claims 1152921504606846976 metadata pairs");
  bytes = good;
  patch<uint64_t>(bytes, Layout::kKvCountAt, ~uint64_t(0));
  expect_rejected(bytes, "metadata pairs");

  // Plausible for a large file, but past the limits that bound the index's memory.
  Writer big;
  big.add_string("padding", std::string(2 << 20, 'x'));
  std::vector<uint8_t> large = big.serialize();
  patch<uint64_t>(large, Layout::kKvCountAt, 70000);
  expect_rejected(large, "header claims 70000 metadata pairs, more than the limit of 65536", ErrorCode::Unsupported);
  patch<uint64_t>(large, Layout::kKvCountAt, 1);
  patch<uint64_t>(large, Layout::kTensorCountAt, 60000);
  expect_rejected(large, "GGUF: ", std::nullopt);  // within the limit: fails reading the infos
  large.resize(40 << 20);
  patch<uint64_t>(large, Layout::kTensorCountAt, 1100000);
  expect_rejected(large, "header claims 1100000 tensors, more than the limit of 1048576", ErrorCode::Unsupported);
  // One pair more than written: the tensor infos are read as a pair and fail somewhere.
  bytes = good;
  patch<uint64_t>(bytes, Layout::kKvCountAt, layout.keys.size() + 1);
  expect_rejected(bytes, "GGUF: ", std::nullopt);
  // Tensor count too large by a few: passes the plausibility bound, then runs out.
  bytes = good;
  patch<uint64_t>(bytes, Layout::kTensorCountAt, 4);
  expect_rejected(bytes, "GGUF: ", std::nullopt);
}

TEST(GgufHostile, Strings) {
  Layout layout;
  const auto good = small_file(&layout);
  auto bytes = good;
  patch<uint64_t>(bytes, layout.key("general.architecture").key_at, 1000000);
  expect_rejected(bytes, "key of metadata pair 1: string length 1000000");
  bytes = good;
  patch<uint64_t>(bytes, layout.key("general.architecture").key_at, ~uint64_t(0));
  expect_rejected(bytes, "runs past end of file");
  bytes = good;
  patch<uint64_t>(bytes, layout.key("general.architecture").value_at, uint64_t(1) << 62);
  expect_rejected(bytes, "value of key 'general.architecture': string length 4611686018427387904");
  bytes = good;
  patch<uint64_t>(bytes, layout.tensor("b.weight").name_at, 5000);
  expect_rejected(bytes, "name of tensor 1: string length 5000");
  bytes = good;
  patch<uint64_t>(bytes, layout.key("llama.block_count").key_at, 0);
  expect_rejected(bytes, "metadata pair 2 has an empty key");

  Writer names;
  names.add_u32(std::string(65536, 'k'), 1);
  expect_rejected(names.serialize(), "metadata pair 0 has a key of 65536 bytes (at most 65535)");
  Writer ok_key;
  ok_key.add_u32(std::string(65535, 'k'), 1);
  EXPECT_NO_THROW(File::open(write_file("long-key.gguf", ok_key.serialize())));
  names = Writer();
  names.add_tensor(std::string(65, 't'), {1}, TensorType::F32, ramp(4));
  expect_rejected(names.serialize(), "tensor 0 has a name of 65 bytes (at most 64)");
  Writer ok_name;
  ok_name.add_tensor(std::string(64, 't'), {1}, TensorType::F32, ramp(4));
  EXPECT_NO_THROW(File::open(write_file("long-name.gguf", ok_name.serialize())));
}

TEST(GgufHostile, Arrays) {
  Layout layout;
  const auto good = small_file(&layout);
  auto bytes = good;
  const uint64_t scores = layout.key("tokenizer.ggml.scores").value_at;
  patch<uint64_t>(bytes, scores + 4, uint64_t(1) << 60);
  expect_rejected(bytes, "key 'tokenizer.ggml.scores': array of 1152921504606846976 f32 values");
  bytes = good;
  patch<uint64_t>(bytes, scores + 4, ~uint64_t(0));  // count * 4 would wrap around
  expect_rejected(bytes, "runs past end of file");
  bytes = good;
  const uint64_t tokens = layout.key("tokenizer.ggml.tokens").value_at;
  patch<uint64_t>(bytes, tokens + 4, uint64_t(1) << 60);
  expect_rejected(bytes, "key 'tokenizer.ggml.tokens': array of 1152921504606846976 strings cannot fit");
  bytes = good;
  patch<uint64_t>(bytes, tokens + 12 + 8 + 5, uint64_t(1) << 40);  // length of element 1 ("a")
  expect_rejected(bytes, "element 1 of key 'tokenizer.ggml.tokens': string length 1099511627776");
  {
    // 2^24 + 1 strings would fit in this (sparse) 128 MiB file, but exceed the limit.
    Writer w;
    std::vector<uint8_t> payload = {8, 0, 0, 0};
    const uint64_t count = (uint64_t(1) << 24) + 1;
    for (int i = 0; i < 8; ++i) payload.push_back(uint8_t(count >> (8 * i)));
    w.add_raw("tokenizer.ggml.tokens", uint32_t(ValueType::ARRAY), payload);
    const std::string path = write_file("many-strings.gguf", w.serialize());
    std::filesystem::resize_file(path, count * 8 + 128);
    try {
      File::open(path);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Unsupported);
      EXPECT_NE(std::string(e.what()).find("array of 16777217 strings exceeds the limit of 16777216"),
                std::string::npos) << e.what();
    }
    std::filesystem::remove(path);
  }
  bytes = good;
  patch<uint32_t>(bytes, scores, 9);
  expect_rejected(bytes, "key 'tokenizer.ggml.scores': arrays of arrays are not supported", ErrorCode::Unsupported);
  bytes = good;
  patch<uint32_t>(bytes, scores, 13);
  expect_rejected(bytes, "key 'tokenizer.ggml.scores': array has unknown element type 13");
}

TEST(GgufHostile, ValueTypes) {
  Layout layout;
  const auto good = small_file(&layout);
  auto bytes = good;
  patch<uint32_t>(bytes, layout.key("llama.block_count").type_at, 13);
  expect_rejected(bytes, "key 'llama.block_count' has unknown value type 13");
  bytes = good;
  patch<uint8_t>(bytes, layout.key("flag").value_at, 2);
  expect_rejected(bytes, "value of key 'flag': bool value 2 is neither 0 nor 1");

  Writer w;  // an array of arrays, [[7u32]], written by hand
  w.add_raw("nested", uint32_t(ValueType::ARRAY),
            {9, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,    // array of 1 array
             4, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,    // of 1 u32
             7, 0, 0, 0});
  expect_rejected(w.serialize(), "key 'nested': arrays of arrays are not supported", ErrorCode::Unsupported);
}

TEST(GgufHostile, DuplicateKeyAndTensor) {
  Writer w = small_writer();
  w.add_u32("llama.block_count", 3);
  expect_rejected(w.serialize(), "duplicate key 'llama.block_count'");
  Writer t = small_writer();
  t.add_tensor("a.weight", {4}, TensorType::F32, ramp(16));
  expect_rejected(t.serialize(), "duplicate tensor name 'a.weight'");
}

TEST(GgufHostile, Alignment) {
  Layout layout;
  const auto good = small_file(&layout);
  for (uint32_t a : {0u, 3u, 48u, 0x80000001u}) {
    auto bytes = good;
    patch<uint32_t>(bytes, layout.key("general.alignment").value_at, a);
    expect_rejected(bytes, "key 'general.alignment' = " + std::to_string(a) + " is not a power of two");
  }
  auto bytes = good;
  patch<uint32_t>(bytes, layout.key("general.alignment").type_at, uint32_t(ValueType::F32));
  expect_rejected(bytes, "key 'general.alignment' has type f32");
  // A larger power of two is fine for the format but the offsets no longer fit it.
  bytes = good;
  patch<uint32_t>(bytes, layout.key("general.alignment").value_at, 64);
  expect_rejected(bytes, "not a multiple of the alignment 64");
  // A huge one pushes the data section past the end of the file.
  bytes = good;
  patch<uint32_t>(bytes, layout.key("general.alignment").value_at, 0x80000000u);
  for (const auto& t : layout.tensors) patch<uint64_t>(bytes, t.offset_at, 0x80000000ull * (&t - &layout.tensors[0]));
  expect_rejected(bytes, "extends past end of file");
}

TEST(GgufHostile, TensorInfo) {
  Layout layout;
  const auto good = small_file(&layout);
  const auto& a = layout.tensor("a.weight");
  const auto& b = layout.tensor("b.weight");
  const auto& c = layout.tensor("c.weight");

  auto bytes = good;
  patch<uint32_t>(bytes, b.type_at, 99);
  expect_rejected(bytes, "tensor 'b.weight' has unknown tensor type 99", ErrorCode::Unsupported);
  bytes = good;
  patch<uint32_t>(bytes, b.type_at, 4);  // a number ggml retired (Q4_2)
  expect_rejected(bytes, "tensor 'b.weight' has unknown tensor type 4", ErrorCode::Unsupported);

  bytes = good;
  patch<uint64_t>(bytes, a.ne_at + 8, 0);
  expect_rejected(bytes, "tensor 'a.weight' has a zero dimension ne[1]");
  bytes = good;
  patch<uint32_t>(bytes, a.n_dims_at, 0);
  expect_rejected(bytes, "tensor 'a.weight' has n_dims 0 (must be 1..4)");
  bytes = good;
  patch<uint32_t>(bytes, a.n_dims_at, 7);
  expect_rejected(bytes, "tensor 'a.weight' has n_dims 7 (must be 1..4)");
  bytes = good;
  patch<uint64_t>(bytes, a.ne_at, uint64_t(1) << 40);
  patch<uint64_t>(bytes, a.ne_at + 8, uint64_t(1) << 40);
  expect_rejected(bytes, "tensor 'a.weight' shape [1099511627776, 1099511627776]: element count overflows");
  bytes = good;
  patch<uint64_t>(bytes, a.ne_at, ~uint64_t(0));
  expect_rejected(bytes, "tensor 'a.weight' shape [18446744073709551615]...: element count overflows");
  bytes = good;
  patch<uint64_t>(bytes, b.ne_at, 33);
  expect_rejected(bytes, "tensor 'b.weight' (Q8_0) has ne[0] = 33, not a multiple of the block size 32");
  // 2^62 F32 elements fit int64 but their byte size does not fit 64 bits.
  bytes = good;
  patch<uint64_t>(bytes, a.ne_at, uint64_t(1) << 31);
  patch<uint64_t>(bytes, a.ne_at + 8, uint64_t(1) << 31);
  expect_rejected(bytes, "tensor 'a.weight' shape [2147483648, 2147483648]: byte size overflows");
  // Large but representable shapes: caught by the bounds check, not the arithmetic.
  bytes = good;
  patch<uint64_t>(bytes, a.ne_at, uint64_t(1) << 30);
  patch<uint64_t>(bytes, a.ne_at + 8, uint64_t(1) << 30);
  expect_rejected(bytes, "tensor 'a.weight': data [offset 0 in the data section at " +
                             std::to_string(layout.data_offset) + ", 4611686018427387904 bytes] extends past end");

  bytes = good;
  patch<uint64_t>(bytes, c.offset_at, 1 << 20);
  expect_rejected(bytes, "tensor 'c.weight': data [offset 1048576 in the data section at " +
                             std::to_string(layout.data_offset) + ", 8 bytes] extends past end of file (size " +
                             std::to_string(good.size()) + ")");
  bytes = good;
  patch<uint64_t>(bytes, c.offset_at, ~uint64_t(31));  // aligned, and overflows when added
  expect_rejected(bytes, "extends past end of file");
  bytes = good;
  uint64_t off;
  std::memcpy(&off, good.data() + c.offset_at, 8);
  patch<uint64_t>(bytes, c.offset_at, off + 1);
  expect_rejected(bytes, "tensor 'c.weight': data offset " + std::to_string(off + 1) +
                             " is not a multiple of the alignment 32");
  bytes = good;
  patch<uint64_t>(bytes, c.offset_at, 0);
  expect_rejected(bytes, "overlaps tensor 'a.weight'");
  bytes = good;
  patch<uint64_t>(bytes, c.name_at, 0);
  expect_rejected(bytes, "tensor 2 has an empty name");
  // Cutting the file inside the last tensor's data, or inside its padding.
  bytes = good;
  bytes.resize(c.data_at + 4);
  expect_rejected(bytes, "tensor 'c.weight': data");
  bytes = good;
  bytes.resize(c.data_at + c.n_bytes);
  expect_rejected(bytes, "and its padding to the alignment 32 extend past end of file");
}

TEST(GgufHostile, NotAFile) {
  try {
    File::open(tmp() + "/does-not-exist.gguf");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::NotFound);
    EXPECT_NE(std::string(e.what()).find("does-not-exist.gguf"), std::string::npos);
  }
  try {
    File::open(tmp());
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Io);
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
  expect_rejected({}, "truncated: magic");
  // Messages name the file.
  expect_rejected({'G', 'G', 'U', 'F', 3, 0, 0, 0}, "hostile.gguf'");
}

}  // namespace
}  // namespace kvg
