// Refusals by name. Every key under "<architecture>." and every tensor must
// be one the engine reads (or a key known to leave the math unchanged);
// anything else names itself in the error. Unknown keys are refused too:
// a new GGUF feature is far likelier to change the computation than not, and
// a refusal can be lifted by implementing it, whereas a silent difference
// breaks the bit-exactness every artifact relies on.
#include "engine/model_refusals.hpp"

#include <cmath>
#include <cstdlib>
#include <string_view>

#include "common/error.hpp"
#include "engine/architectures.hpp"
#include "engine/gguf/gguf_file.hpp"

namespace kvg {

namespace {

[[noreturn]] void refuse(const std::string& what) {
  throw Error(ErrorCode::Unsupported, "model: " + what + " is not implemented by this engine; refusing to load "
                                      "rather than compute different math");
}

// Keys the engine reads (model.cpp read_config).
constexpr std::string_view kImplemented[] = {
    "context_length", "embedding_length", "feed_forward_length", "block_count", "attention.head_count",
    "attention.head_count_kv", "attention.key_length", "rope.dimension_count", "rope.freq_base",
    "attention.layer_norm_rms_epsilon", "vocab_size",
};

bool implemented(std::string_view key) {
  for (const std::string_view k : kImplemented)
    if (key == k) return true;
  return false;
}

double number(const gguf::Value& v) {
  switch (v.type) {
    case gguf::ValueType::F32:
    case gguf::ValueType::F64: return v.f;
    case gguf::ValueType::I8:
    case gguf::ValueType::I16:
    case gguf::ValueType::I32:
    case gguf::ValueType::I64: return double(v.i);
    case gguf::ValueType::U8:
    case gguf::ValueType::U16:
    case gguf::ValueType::U32:
    case gguf::ValueType::U64:
    case gguf::ValueType::BOOL: return double(v.u);
    default: return std::nan("");
  }
}

std::string value_text(const gguf::Value& v) {
  if (v.type == gguf::ValueType::STRING) return "\"" + std::string(v.s) + "\"";
  if (v.type == gguf::ValueType::ARRAY) return "an array";
  const double d = number(v);
  std::string s = std::to_string(d);
  if (d == std::floor(d) && std::fabs(d) < 1e15) s = std::to_string(int64_t(d));
  return s;
}

// A per-layer key may be an array (one value per layer): every entry must be 0.
bool all_zero(const gguf::File& file, const std::string& key, const gguf::Value& v) {
  if (v.type == gguf::ValueType::ARRAY) {
    if (v.array_type == gguf::ValueType::STRING) return false;
    for (const int32_t x : file.get_i32_array(key))
      if (x != 0) return false;
    return true;
  }
  return number(v) == 0;
}

void check_key(const gguf::File& file, const std::string& full, std::string_view key, const gguf::Value& v,
               const ArchitectureTraits& traits) {
  const std::string named = "'" + full + "' = " + value_text(v);
  if (traits.layer_norm && key == "attention.layer_norm_rms_epsilon")
    refuse("an RMSNorm epsilon (" + named + ") on a LayerNorm architecture");
  if (implemented(key)) return;
  // Rotary scaling: "none" is plain RoPE, "linear" scales positions
  // (ModelConfig::rope_freq_scale); yarn and longrope are not implemented.
  if (key == "rope.scaling.type") {
    if (v.type != gguf::ValueType::STRING) refuse("rope scaling " + named);
    if (v.s == "none" || v.s == "linear") return;
    refuse("rope scaling " + named);
  }
  if (key == "rope.scaling.factor" || key == "rope.scale_linear") {
    // Without a type key, llama.cpp applies a factor as linear scaling.
    const std::string type_key = full.substr(0, full.size() - key.size()) + "rope.scaling.type";
    const std::optional<std::string> type = file.opt_string(type_key);
    if (type && *type == "none") return;
    if (number(v) == 0 || number(v) == 1) return;
    if (!type) refuse("rope scaling factor " + named + " without rope.scaling.type");
    return;  // the type key's own check names it
  }
  if (key == "rope.scaling.attn_factor") {  // yarn / longrope's attention temperature
    if (number(v) == 1) return;
    refuse("rope attention factor (" + named + ")");
  }
  // Informational when no scaling applies (checked above).
  if (key == "rope.scaling.original_context_length" || key == "rope.scaling.finetuned") return;
  if (key == "attention.max_alibi_bias") {
    if (number(v) == 0) return;
    refuse("ALiBi (" + named + ")");
  }
  if (key == "expert_count" || key == "expert_used_count" || key == "expert_shared_count" ||
      key == "expert_weights_scale" || key == "expert_gating_func" || key == "expert_feed_forward_length" ||
      key == "expert_weights_norm" || key == "leading_dense_block_count") {
    if (v.type != gguf::ValueType::STRING && all_zero(file, full, v)) return;
    refuse("mixture of experts (" + named + ")");
  }
  if (traits.softcap && (key == "attn_logit_softcapping" || key == "final_logit_softcapping")) return;
  if (key == "attn_logit_softcapping" || key == "final_logit_softcapping" || key == "attention.softcap" ||
      key.find("softcap") != std::string_view::npos)
    refuse("logit soft-capping (" + named + ") on this architecture");
  if (traits.sliding_period > 0 && key == "attention.sliding_window") return;
  // Written by some converters: harmless when it states the family's own pattern.
  if (traits.sliding_period > 0 && key == "attention.sliding_window_pattern" && number(v) == traits.sliding_period)
    return;
  if (key.rfind("attention.sliding_window", 0) == 0 || key == "sliding_window")
    refuse("sliding-window attention (" + named + ") on this architecture");
  if (key == "attention.value_length") {
    const std::optional<uint64_t> k = file.opt_uint(full.substr(0, full.size() - key.size()) + "attention.key_length");
    const int64_t heads = int64_t(file.get_uint(full.substr(0, full.size() - key.size()) + "attention.head_count"));
    const int64_t embd = int64_t(file.get_uint(full.substr(0, full.size() - key.size()) + "embedding_length"));
    const double key_length = k ? double(*k) : double(embd / (heads ? heads : 1));
    if (number(v) == key_length) return;
    refuse("a value head size different from the key head size (" + named + ")");
  }
  if (traits.layer_norm && key == "attention.layer_norm_epsilon") return;
  if (key == "attention.layer_norm_epsilon") refuse("LayerNorm (" + named + "; the engine implements RMSNorm)");
  if (key == "attention.clamp_kqv") refuse("clamped q/k/v (" + named + ")");
  if (key == "attention.causal") {  // false: bidirectional attention (embedding models)
    if (number(v) != 0) return;
    refuse("non-causal attention (" + named + ")");
  }
  if (key == "use_parallel_residual") {
    if (number(v) == 0) return;
    refuse("parallel residual (" + named + ")");
  }
  refuse("metadata key " + named + " (unknown to this engine, so it may change the computation)");
}

// Block tensor suffixes the engine reads; the optional ones only where the
// architecture has them.
bool known_block_tensor(std::string_view suffix, const ArchitectureTraits& traits) {
  if (traits.layer_norm && suffix == "ffn_gate.weight") return false;  // starcoder2's FFN has no gate
  static constexpr std::string_view always[] = {
      "attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
      "ffn_norm.weight",  "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight",
  };
  for (const std::string_view s : always)
    if (suffix == s) return true;
  if (traits.qkv_bias && (suffix == "attn_q.bias" || suffix == "attn_k.bias" || suffix == "attn_v.bias")) return true;
  if (traits.qk_norm && (suffix == "attn_q_norm.weight" || suffix == "attn_k_norm.weight")) return true;
  if (traits.post_norms && (suffix == "post_attention_norm.weight" || suffix == "post_ffw_norm.weight")) return true;
  if (traits.layer_norm && (suffix == "attn_norm.bias" || suffix == "ffn_norm.bias" || suffix == "attn_output.bias" ||
                            suffix == "ffn_up.bias" || suffix == "ffn_down.bias"))
    return true;
  return traits.fused && suffix == "attn_qkv.weight";
}

void check_tensor(const std::string& name, const ArchitectureTraits& traits, int n_layer) {
  if (name == "token_embd.weight" || name == "output_norm.weight" || name == "output.weight") return;
  if (traits.layer_norm && name == "output_norm.bias") return;
  if (name == "rope_freqs.weight") {
    if (traits.rope_freqs) return;
    refuse("tensor 'rope_freqs.weight' (per-dimension rotary frequency factors) on architecture '" +
           std::string(traits.name) + "'");
  }
  if (name.rfind("blk.", 0) == 0) {
    const size_t dot = name.find('.', 4);
    const std::string_view index = std::string_view(name).substr(4, dot == std::string::npos ? 0 : dot - 4);
    char* end = nullptr;
    const std::string index_text(index);
    const long layer = std::strtol(index_text.c_str(), &end, 10);
    if (index.empty() || *end != '\0' || layer < 0 || layer >= n_layer)
      refuse("tensor '" + name + "' (not a block of the " + std::to_string(n_layer) + " the model declares)");
    const std::string_view suffix = std::string_view(name).substr(dot + 1);
    if (suffix.find("_exps") != std::string_view::npos || suffix.find("_shexp") != std::string_view::npos ||
        suffix.rfind("ffn_gate_inp", 0) == 0)
      refuse("mixture of experts (tensor '" + name + "')");
    if (known_block_tensor(suffix, traits)) return;
    refuse("tensor '" + name + "' (unknown to this engine, so it would be ignored)");
  }
  refuse("tensor '" + name + "' (unknown to this engine, so it would be ignored)");
}

}  // namespace

void refuse_unimplemented(const gguf::File& file, const ArchitectureTraits& traits, int n_layer) {
  const std::string prefix = std::string(traits.name) + ".";
  for (const gguf::KeyValue& kv : file.metadata())
    if (kv.key.rfind(prefix, 0) == 0)
      check_key(file, kv.key, std::string_view(kv.key).substr(prefix.size()), kv.value, traits);
  for (const gguf::TensorInfo& t : file.tensors()) check_tensor(t.name, traits, n_layer);
}

}  // namespace kvg
