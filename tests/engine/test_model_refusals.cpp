// Refusal by name: a GGUF carrying a key, tensor or tensor type that would
// change the computation, and that the engine does not implement, must not
// load. Each case starts from a tiny model that loads (checked first, so a
// refusal that fires on everything fails here too) and adds one thing.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/model.hpp"
#include "tests/support/data_paths.hpp"
#include "tools/gguf_writer.hpp"
#include "tools/synth_model.hpp"

namespace kvg {
namespace {

using gguf::TensorType;
using Edit = std::function<void(gguf::Writer&)>;

struct Spec {
  std::string architecture = "llama";
  std::string tokenizer_pre = "";  // "" writes no tokenizer.ggml.pre key
  Edit metadata;                   // extra keys
  Edit tensors;                    // extra tensors
  TensorType ffn_down = TensorType::F32;
};

std::vector<uint8_t> zeros(const std::vector<uint64_t>& ne, TensorType type) {
  return std::vector<uint8_t>(gguf::Writer::tensor_bytes(ne, type), 0);
}

// A llama (or qwen2) model of 2 layers, width 64, every tensor zero: loading
// never looks at weight values, only at names, shapes and types.
std::string write_model(const std::string& name, const Spec& spec) {
  SynthOptions o;
  o.n_embd = 64, o.n_layer = 2, o.n_head = 4, o.n_head_kv = 2, o.n_ff = 96, o.n_vocab = 300, o.n_ctx = 128;
  static const std::string kSynth[] = {"qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3", "starcoder2"};
  o.architecture = std::find(std::begin(kSynth), std::end(kSynth), spec.architecture) != std::end(kSynth)
                       ? spec.architecture
                       : "llama";
  const SynthVocab vocab = synth_vocab(o.n_vocab);
  gguf::Writer w;
  const std::string a = spec.architecture + ".";
  w.add_string("general.architecture", spec.architecture);
  w.add_u32(a + "context_length", 128);
  w.add_u32(a + "embedding_length", 64);
  w.add_u32(a + "feed_forward_length", 96);
  w.add_u32(a + "block_count", 2);
  w.add_u32(a + "attention.head_count", 4);
  w.add_u32(a + "attention.head_count_kv", 2);
  w.add_u32(a + "rope.dimension_count", 16);
  w.add_f32(a + "rope.freq_base", 10000.0f);
  w.add_f32(a + (spec.architecture == "starcoder2" ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon"),
            1e-5f);
  w.add_string("tokenizer.ggml.model", "llama");
  if (!spec.tokenizer_pre.empty()) w.add_string("tokenizer.ggml.pre", spec.tokenizer_pre);
  w.add_array("tokenizer.ggml.tokens", std::span<const std::string>(vocab.pieces));
  w.add_array("tokenizer.ggml.scores", std::span<const float>(vocab.scores));
  w.add_array("tokenizer.ggml.token_type", std::span<const int32_t>(vocab.types));
  if (spec.metadata) spec.metadata(w);
  for (const SynthTensor& t : synth_tensors(o)) {
    const TensorType type = t.name.find("ffn_down") != std::string::npos ? spec.ffn_down : TensorType::F32;
    w.add_tensor(t.name, t.ne, type, zeros(t.ne, type));
  }
  if (spec.tensors) spec.tensors(w);
  const std::string path = test::temp_dir("refusals") + "/" + name + ".gguf";
  w.write(path);
  return path;
}

// Loading must fail with Unsupported and a message containing every `names`.
void expect_refused(const std::string& name, const Spec& spec, const std::vector<std::string>& names) {
  SCOPED_TRACE(name);
  const std::string path = write_model(name, spec);
  try {
    Model::load(path);
    ADD_FAILURE() << name << ": the model loaded; expected a refusal naming " << names.front();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported) << e.what();
    for (const std::string& n : names) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

Edit key_str(const std::string& key, const std::string& value) {
  return [=](gguf::Writer& w) { w.add_string(key, value); };
}
Edit key_f32(const std::string& key, float value) {
  return [=](gguf::Writer& w) { w.add_f32(key, value); };
}
Edit key_u32(const std::string& key, uint32_t value) {
  return [=](gguf::Writer& w) { w.add_u32(key, value); };
}
Edit tensor(const std::string& name, std::vector<uint64_t> ne, TensorType type = TensorType::F32) {
  return [=](gguf::Writer& w) { w.add_tensor(name, ne, type, zeros(ne, type)); };
}
Spec with_key(Edit e) { Spec s; s.metadata = std::move(e); return s; }
Spec with_tensor(Edit e) { Spec s; s.tensors = std::move(e); return s; }

TEST(ModelRefusals, BaselinesLoad) {
  EXPECT_NO_THROW(Model::load(write_model("plain", {})));
  Spec qwen;
  qwen.architecture = "qwen2";
  EXPECT_NO_THROW(Model::load(write_model("qwen2", qwen)));
  // Keys that leave the math unchanged are accepted.
  EXPECT_NO_THROW(Model::load(write_model("neutral", with_key([](gguf::Writer& w) {
    w.add_string("llama.rope.scaling.type", "none");
    w.add_f32("llama.attention.max_alibi_bias", 0.0f);
    w.add_u32("llama.expert_count", 0);
    w.add_u32("llama.expert_used_count", 0);
    w.add_u32("llama.vocab_size", 300);
    w.add_u32("llama.attention.value_length", 16);
    w.add_bool("llama.attention.causal", true);
  }))));
  Spec linear1 = with_key([](gguf::Writer& w) {
    w.add_string("llama.rope.scaling.type", "linear");
    w.add_f32("llama.rope.scaling.factor", 1.0f);
  });
  EXPECT_NO_THROW(Model::load(write_model("linear1", linear1)));
  // Implemented since: linear rope scaling, Llama 3.1's frequency factors.
  Spec linear4 = with_key([](gguf::Writer& w) {
    w.add_string("llama.rope.scaling.type", "linear");
    w.add_f32("llama.rope.scaling.factor", 4.0f);
  });
  EXPECT_EQ(Model::load(write_model("linear4", linear4))->config().rope_freq_scale, 0.25);
  Spec freqs = with_tensor([](gguf::Writer& w) {
    const std::vector<float> factors = {1, 1, 1, 1, 1, 2, 4, 8};
    w.add_tensor("rope_freqs.weight", {8}, TensorType::F32,
                 std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(factors.data()),
                                      reinterpret_cast<const uint8_t*>(factors.data() + factors.size())));
  });
  EXPECT_EQ(Model::load(write_model("rope-freqs-llama", freqs))->config().rope_freq_factors.back(), 8.0f);
}

// Every family loads with its own keys and tensors.
TEST(ModelRefusals, FamiliesLoadWithTheirOwnKeysAndTensors) {
  for (const char* arch : {"qwen3", "phi3", "gemma", "gemma2", "gemma3", "starcoder2"}) {
    Spec s;
    s.architecture = arch;
    const std::string a = std::string(arch) + ".";
    s.metadata = [a, arch](gguf::Writer& w) {
      const std::string family = arch;
      if (family == "phi3" || family == "gemma2" || family == "gemma3") w.add_u32(a + "attention.sliding_window", 32);
      if (family == "gemma3") w.add_u32(a + "attention.sliding_window_pattern", 6);
      if (family == "gemma2") {
        w.add_f32(a + "attn_logit_softcapping", 50.0f);
        w.add_f32(a + "final_logit_softcapping", 30.0f);
      }
    };
    EXPECT_NO_THROW(Model::load(write_model(std::string("family-") + arch, s))) << arch;
  }
}

TEST(ModelRefusals, WhatAFamilyDoesNotImplement) {
  Spec yarn;
  yarn.architecture = "gemma3";
  yarn.metadata = [](gguf::Writer& w) {
    w.add_u32("gemma3.attention.sliding_window", 32);
    w.add_string("gemma3.rope.scaling.type", "yarn");
    w.add_f32("gemma3.rope.scaling.factor", 4.0f);
  };
  expect_refused("gemma3-yarn", yarn, {"gemma3.rope.scaling.type", "yarn"});
  Spec qwen3_cap;
  qwen3_cap.architecture = "qwen3";
  qwen3_cap.metadata = key_f32("qwen3.final_logit_softcapping", 30.0f);
  expect_refused("qwen3-softcap", qwen3_cap, {"soft-capping", "qwen3.final_logit_softcapping"});
  Spec qwen3_window = qwen3_cap;
  qwen3_window.metadata = key_u32("qwen3.attention.sliding_window", 64);
  expect_refused("qwen3-window", qwen3_window, {"sliding-window", "qwen3.attention.sliding_window"});
  Spec gemma_freqs;
  gemma_freqs.architecture = "gemma";
  gemma_freqs.tensors = tensor("rope_freqs.weight", {8});
  expect_refused("gemma-rope-freqs", gemma_freqs, {"rope_freqs.weight", "gemma"});
  Spec longrope;  // Phi-3 128k: per-dimension long/short factors
  longrope.architecture = "phi3";
  longrope.metadata = key_u32("phi3.attention.sliding_window", 32);
  longrope.tensors = tensor("rope_factors_long.weight", {8});
  expect_refused("phi3-longrope", longrope, {"rope_factors_long.weight"});
  Spec attn_factor = longrope;
  attn_factor.tensors = nullptr;
  attn_factor.metadata = [](gguf::Writer& w) {
    w.add_u32("phi3.attention.sliding_window", 32);
    w.add_f32("phi3.rope.scaling.attn_factor", 1.19f);
  };
  expect_refused("phi3-attn-factor", attn_factor, {"phi3.rope.scaling.attn_factor"});
  Spec gated;  // starcoder2's FFN has no gate: a gate tensor would be ignored
  gated.architecture = "starcoder2";
  gated.tensors = tensor("blk.0.ffn_gate.weight", {64, 96});
  expect_refused("starcoder2-gate", gated, {"blk.0.ffn_gate.weight"});
  Spec pattern = yarn;  // a sliding pattern other than the family's
  pattern.metadata = [](gguf::Writer& w) {
    w.add_u32("gemma3.attention.sliding_window", 32);
    w.add_u32("gemma3.attention.sliding_window_pattern", 4);
  };
  expect_refused("gemma3-pattern", pattern, {"gemma3.attention.sliding_window_pattern"});
  Spec gemma3_no_window;
  gemma3_no_window.architecture = "gemma3";
  try {
    Model::load(write_model("gemma3-no-window", gemma3_no_window));
    ADD_FAILURE() << "gemma3 without a window loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gemma3.attention.sliding_window"), std::string::npos) << e.what();
  }
  Spec bad_factor = with_tensor(tensor("rope_freqs.weight", {8}));  // zeros: not a frequency divisor
  try {
    Model::load(write_model("rope-freqs-zero", bad_factor));
    ADD_FAILURE() << "zero rope frequency factors loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rope_freqs.weight"), std::string::npos) << e.what();
  }
}

TEST(ModelRefusals, RopeScaling) {
  for (const char* type : {"yarn", "longrope"}) {
    Spec s = with_key([type](gguf::Writer& w) {
      w.add_string("llama.rope.scaling.type", type);
      w.add_f32("llama.rope.scaling.factor", 4.0f);
    });
    expect_refused(std::string("rope-") + type, s, {"llama.rope.scaling.type", type});
  }
  expect_refused("rope-factor-only", with_key(key_f32("llama.rope.scaling.factor", 8.0f)),
                 {"llama.rope.scaling.factor"});
  // Llama 3.1's frequency factors are a llama feature only.
  Spec qwen_freqs;
  qwen_freqs.architecture = "qwen2";
  qwen_freqs.tensors = tensor("rope_freqs.weight", {8});
  expect_refused("rope-freqs-qwen2", qwen_freqs, {"rope_freqs.weight", "qwen2"});
}

// A real file: DeepSeek Coder's vocabulary GGUF keeps the model's
// hyper-parameters, linear rope scaling by 4 among them. Linear scaling is
// implemented, so what stops it now is that it holds no weights.
TEST(ModelRefusals, RealDeepseekCoderRopeScaling) {
  const char* vocab = "tokenizer-vectors/ggml-vocab-deepseek-coder.gguf";
  KVG_REQUIRE_TEST_DATA(vocab);
  try {
    Model::load(test::data_path(vocab));
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("rope"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("token_embd.weight"), std::string::npos) << e.what();
  }
}

TEST(ModelRefusals, AlibiSoftcapSlidingWindow) {
  expect_refused("alibi", with_key(key_f32("llama.attention.max_alibi_bias", 8.0f)),
                 {"ALiBi", "llama.attention.max_alibi_bias"});
  expect_refused("softcap-final", with_key(key_f32("llama.final_logit_softcapping", 30.0f)),
                 {"soft-capping", "llama.final_logit_softcapping"});
  expect_refused("softcap-attn", with_key(key_f32("llama.attn_logit_softcapping", 50.0f)),
                 {"soft-capping", "llama.attn_logit_softcapping"});
  expect_refused("sliding", with_key(key_u32("llama.attention.sliding_window", 4096)),
                 {"sliding-window", "llama.attention.sliding_window"});
}

TEST(ModelRefusals, MixtureOfExperts) {
  expect_refused("moe-key", with_key(key_u32("llama.expert_count", 8)), {"mixture of experts", "llama.expert_count"});
  expect_refused("moe-used", with_key(key_u32("llama.expert_used_count", 2)), {"llama.expert_used_count"});
  expect_refused("moe-tensor", with_tensor(tensor("blk.0.ffn_gate_exps.weight", {64, 96, 8})),
                 {"mixture of experts", "blk.0.ffn_gate_exps.weight"});
  expect_refused("moe-router", with_tensor(tensor("blk.1.ffn_gate_inp.weight", {64, 8})),
                 {"blk.1.ffn_gate_inp.weight"});
}

TEST(ModelRefusals, UnknownKeysAndTensors) {
  expect_refused("unknown-key", with_key(key_f32("llama.attention.scale", 0.5f)), {"llama.attention.scale"});
  expect_refused("unknown-string-key", with_key(key_str("llama.pooling_type", "mean")), {"llama.pooling_type"});
  expect_refused("layernorm", with_key(key_f32("llama.attention.layer_norm_epsilon", 1e-5f)),
                 {"LayerNorm", "llama.attention.layer_norm_epsilon"});
  expect_refused("non-causal", with_key([](gguf::Writer& w) { w.add_bool("llama.attention.causal", false); }),
                 {"non-causal", "llama.attention.causal"});
  expect_refused("value-length", with_key(key_u32("llama.attention.value_length", 32)),
                 {"llama.attention.value_length"});
  expect_refused("block-tensor", with_tensor(tensor("blk.0.attn_q_norm.weight", {16})), {"blk.0.attn_q_norm.weight"});
  expect_refused("extra-block", with_tensor(tensor("blk.2.attn_norm.weight", {64})), {"blk.2.attn_norm.weight"});
  expect_refused("top-tensor", with_tensor(tensor("pos_embd.weight", {64, 128})), {"pos_embd.weight"});
  // q/k/v biases are read only by architectures that have them.
  expect_refused("llama-bias", with_tensor(tensor("blk.0.attn_q.bias", {64})), {"blk.0.attn_q.bias"});
}

TEST(ModelRefusals, ArchitectureTokenizerAndTensorType) {
  Spec arch;
  arch.architecture = "falcon";
  expect_refused("arch", arch, {"architecture 'falcon'"});
  Spec pre;
  pre.tokenizer_pre = "qwen2";  // a BPE pre-tokenizer on a SentencePiece vocabulary
  expect_refused("spm-pre", pre, {"tokenizer.ggml.pre", "qwen2"});
  Spec q5;
  q5.ffn_down = TensorType::Q8_1;  // a weight format the recipe does not decode
  expect_refused("tensor-type", q5, {"blk.0.ffn_down.weight", "Q8_1"});
}

}  // namespace
}  // namespace kvg
