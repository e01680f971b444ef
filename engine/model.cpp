#include "engine/model.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "common/error.hpp"
#include "engine/architectures.hpp"
#include "engine/gguf/gguf_file.hpp"
#include "engine/knowledge_template.hpp"
#include "engine/model_refusals.hpp"
#include "kernels/cpu/dequantize.hpp"
#include "storage/sha256.hpp"

namespace kvg {

namespace {

// Generous bounds: anything beyond them is a damaged or hostile file, and
// checking here keeps every later size computation far from overflow.
constexpr uint64_t kMaxLayers = 1024, kMaxWidth = 1 << 17, kMaxHeads = 1024, kMaxHeadDim = 512,
                   kMaxVocab = 1 << 22, kMaxContext = 1 << 22;

[[noreturn]] void fail(const std::string& what) { throw Error(ErrorCode::Corrupt, "model: " + what); }

int bounded(const gguf::File& file, const std::string& key, uint64_t value, uint64_t max) {
  if (value == 0 || value > max)
    fail("metadata '" + key + "' = " + std::to_string(value) + " is outside 1.." + std::to_string(max));
  (void)file;
  return int(value);
}

WeightType weight_type_of(const gguf::TensorInfo& t) {
  switch (t.type) {
    case gguf::TensorType::F32: return WeightType::F32;
    case gguf::TensorType::F16: return WeightType::F16;
    case gguf::TensorType::BF16: return WeightType::BF16;
    case gguf::TensorType::Q8_0: return WeightType::Q8_0;
    case gguf::TensorType::Q4_0: return WeightType::Q4_0;
    case gguf::TensorType::Q4_K: return WeightType::Q4_K;
    case gguf::TensorType::Q6_K: return WeightType::Q6_K;
    case gguf::TensorType::Q4_1: return WeightType::Q4_1;
    case gguf::TensorType::Q5_0: return WeightType::Q5_0;
    case gguf::TensorType::Q5_1: return WeightType::Q5_1;
    case gguf::TensorType::Q2_K: return WeightType::Q2_K;
    case gguf::TensorType::Q3_K: return WeightType::Q3_K;
    case gguf::TensorType::Q5_K: return WeightType::Q5_K;
    default:
      throw Error(ErrorCode::Unsupported, "model: tensor '" + t.name + "' has type " +
                                              gguf::tensor_type_name(t.type) +
                                              ", which the f32-portable-v1 recipe does not implement "
                                              "(supported: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, "
                                              "q4_k, q5_k, q6_k)");
  }
}

const gguf::TensorInfo& require_tensor(const gguf::File& file, const std::string& name) {
  const gguf::TensorInfo* t = file.find_tensor(name);
  if (!t) fail("tensor '" + name + "' is missing");
  return *t;
}

std::string shape_text(const std::vector<uint64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

WeightMatrix matrix(const gguf::File& file, const std::string& name, int64_t cols, int64_t rows) {
  const gguf::TensorInfo& t = require_tensor(file, name);
  if (t.ne.size() != 2 || int64_t(t.ne[0]) != cols || int64_t(t.ne[1]) != rows)
    fail("tensor '" + name + "' has shape " + shape_text(t.ne) + ", expected [" + std::to_string(cols) +
         ", " + std::to_string(rows) + "]");
  WeightMatrix w;
  w.type = weight_type_of(t);
  w.data = t.data;
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = size_t(cols / weight_block_elements(w.type)) * size_t(weight_block_bytes(w.type));
  return w;
}

// Rows [first, first + count) of a matrix, as a matrix of their own.
WeightMatrix rows_of(const WeightMatrix& m, int64_t first, int64_t count) {
  WeightMatrix w = m;
  w.data = m.data + size_t(first) * m.row_bytes;
  w.rows = count;
  return w;
}

std::vector<float> vector_weights(const gguf::File& file, const std::string& name, int64_t n) {
  WeightMatrix w = [&] {
    const gguf::TensorInfo& t = require_tensor(file, name);
    if (t.ne.size() != 1 || int64_t(t.ne[0]) != n)
      fail("tensor '" + name + "' has shape " + shape_text(t.ne) + ", expected [" + std::to_string(n) + "]");
    WeightMatrix m;
    m.type = weight_type_of(t);
    m.data = t.data;
    m.rows = 1;
    m.cols = n;
    m.row_bytes = t.n_bytes;
    return m;
  }();
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(w, 0, out.data());
  return out;
}

// What the families add (engine/architectures.hpp); the refusals have
// already checked that every key present is one of these.
void read_family_config(const gguf::File& file, const ArchitectureTraits& traits, ModelConfig& c) {
  const std::string a = c.architecture + ".";
  c.qk_norm = traits.qk_norm;
  c.post_norms = traits.post_norms;
  c.embed_scale = traits.embed_scale;
  c.layer_norm = traits.layer_norm;
  c.gated_ffn = !traits.layer_norm;
  c.ffn_activation = traits.activation;
  c.rope_base_local = traits.local_rope_base;
  // gemma2/3 scale queries by 1/sqrt(query_pre_attn_scalar): n_embd / n_head
  // for the largest model, head_dim otherwise (llama.cpp keys this on depth).
  const bool largest = traits.largest_n_layer > 0 && c.n_layer == traits.largest_n_layer;
  c.attn_scale = 1.0f / std::sqrt(float(largest ? c.n_embd / c.n_head : c.head_dim));
  auto positive = [&](const std::string& key) -> float {
    const std::optional<double> v = file.opt_float(a + key);
    if (!v) return 0.0f;
    if (!(*v > 0.0 && *v < 1e6)) fail("metadata '" + a + key + "' = " + std::to_string(*v) + " is outside (0, 1e6)");
    return float(*v);
  };
  if (traits.softcap) {
    c.attn_softcap = positive("attn_logit_softcapping");
    c.final_softcap = positive("final_logit_softcapping");
  }
  if (const std::optional<std::string> type = file.opt_string(a + "rope.scaling.type"); type && *type == "linear") {
    const double factor = file.opt_float(a + "rope.scaling.factor").value_or(1.0);
    if (!(factor >= 1.0 && factor <= 1024.0)) fail("rope.scaling.factor " + std::to_string(factor) + " is outside [1, 1024]");
    c.rope_freq_scale = 1.0 / factor;
  }
  if (traits.sliding_period > 0) {
    c.sliding_period = traits.sliding_period;
    const std::optional<uint64_t> window = file.opt_uint(a + "attention.sliding_window");
    // Files written before the key existed: the window llama.cpp assumes.
    const uint64_t w = window.value_or(uint64_t(assumed_window(traits, c.n_layer, c.n_ctx)));
    if (w == 0)
      throw Error(ErrorCode::Unsupported, "model: " + c.architecture + " without '" + a +
                                              "attention.sliding_window' (the window cannot be derived)");
    // A window as long as the context masks nothing: plain causal attention.
    c.sliding_window = w >= uint64_t(c.n_ctx) ? 0 : int(w);
  }
}

ModelConfig read_config(const gguf::File& file, const Tokenizer& tokenizer) {
  ModelConfig c;
  c.architecture = file.get_string("general.architecture");
  const ArchitectureTraits& traits = architecture_traits(c.architecture);
  c.name = file.opt_string("general.name").value_or("");
  const std::string a = c.architecture + ".";
  auto need = [&](const std::string& key, uint64_t max) { return bounded(file, a + key, file.get_uint(a + key), max); };
  c.n_layer = need("block_count", kMaxLayers);
  c.n_embd = need("embedding_length", kMaxWidth);
  c.n_ff = need("feed_forward_length", kMaxWidth * 8);
  c.n_head = need("attention.head_count", kMaxHeads);
  c.n_head_kv = bounded(file, a + "attention.head_count_kv",
                        file.opt_uint(a + "attention.head_count_kv").value_or(uint64_t(c.n_head)), kMaxHeads);
  c.n_ctx = need("context_length", kMaxContext);
  if (c.n_embd % c.n_head != 0)
    fail("embedding_length " + std::to_string(c.n_embd) + " is not a multiple of head_count " +
         std::to_string(c.n_head));
  c.head_dim = bounded(file, a + "attention.key_length",
                       file.opt_uint(a + "attention.key_length").value_or(uint64_t(c.n_embd / c.n_head)), kMaxHeadDim);
  if (c.n_head % c.n_head_kv != 0)
    fail("head_count " + std::to_string(c.n_head) + " is not a multiple of head_count_kv " +
         std::to_string(c.n_head_kv));
  c.rope_dim = bounded(file, a + "rope.dimension_count",
                       file.opt_uint(a + "rope.dimension_count").value_or(uint64_t(c.head_dim)), uint64_t(c.head_dim));
  if (c.rope_dim % 2 != 0) fail("rope.dimension_count " + std::to_string(c.rope_dim) + " is odd");
  c.rope_base = file.opt_float(a + "rope.freq_base").value_or(10000.0);
  if (!(c.rope_base > 1.0 && c.rope_base < 1e12)) fail("rope.freq_base " + std::to_string(c.rope_base) + " is implausible");
  c.norm_eps = float(file.opt_float(a + (traits.layer_norm ? "attention.layer_norm_epsilon"
                                                            : "attention.layer_norm_rms_epsilon"))
                         .value_or(1e-5));
  if (!(c.norm_eps > 0.0f && c.norm_eps < 1.0f)) fail("attention.layer_norm_rms_epsilon is outside (0, 1)");
  c.rope_style = traits.rope_style;
  c.qkv_bias = traits.qkv_bias;
  refuse_unimplemented(file, traits, c.n_layer);
  read_family_config(file, traits, c);
  // The embedding decides the logits width; a vocabulary list may be shorter
  // (padded embeddings) but never longer.
  const gguf::TensorInfo& embd = require_tensor(file, "token_embd.weight");
  c.n_vocab = bounded(file, "token_embd.weight rows", embd.ne.size() == 2 ? embd.ne[1] : 0, kMaxVocab);
  if (tokenizer.size() > size_t(c.n_vocab))
    fail("tokenizer has " + std::to_string(tokenizer.size()) + " tokens but token_embd.weight only " +
         std::to_string(c.n_vocab) + " rows");
  return c;
}

// kvg.knowledge_template: text, and a template KnowledgeTemplate::parse
// accepts; anything else is refused by name at load rather than when the
// first question is laid out.
std::optional<std::string> read_knowledge_template(const gguf::File& file) {
  const std::string key(kKnowledgeTemplateKey);
  const gguf::Value* v = file.find(key);
  if (!v) return std::nullopt;
  if (v->type != gguf::ValueType::STRING)
    fail("metadata '" + key + "' is " + gguf::value_type_name(v->type) + ", not a string");
  const std::string text(v->s);
  try {
    (void)KnowledgeTemplate::parse(text);
  } catch (const Error& e) {
    fail("metadata '" + key + "' is not a knowledge template (" + e.what() + ")");
  }
  return text;
}

}  // namespace

std::shared_ptr<const Model> Model::load(const std::string& path,
                                          const std::optional<std::array<uint8_t, 32>>& known_fingerprint) {
  return read(path, known_fingerprint);
}

std::shared_ptr<const Model> Model::load_without_weights(
    const std::string& path, const std::optional<std::array<uint8_t, 32>>& known_fingerprint) {
  const std::shared_ptr<Model> model = read(path, known_fingerprint);
  model->token_embd_ = {};
  model->output_ = {};
  model->output_norm_.clear();
  model->output_norm_b_.clear();
  model->layers_.clear();
  model->file_.reset();  // the only holder of the mapping: unmapped here
  return model;
}

std::shared_ptr<Model> Model::read(const std::string& path,
                                   const std::optional<std::array<uint8_t, 32>>& known_fingerprint) {
  std::shared_ptr<Model> model(new Model());
  model->file_ = gguf::File::open(path);
  const gguf::File& file = *model->file_;
  model->path_ = path;
  model->tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_gguf(file));
  model->config_ = read_config(file, *model->tokenizer_);
  model->knowledge_template_ = read_knowledge_template(file);
  ModelConfig& c = model->config_;

  const int64_t q_width = int64_t(c.n_head) * c.head_dim, kv_width = int64_t(c.n_head_kv) * c.head_dim;
  model->token_embd_ = matrix(file, "token_embd.weight", c.n_embd, c.n_vocab);
  model->output_norm_ = vector_weights(file, "output_norm.weight", c.n_embd);
  if (c.layer_norm) model->output_norm_b_ = vector_weights(file, "output_norm.bias", c.n_embd);
  c.tied_output = file.find_tensor("output.weight") == nullptr;
  model->output_ = c.tied_output ? model->token_embd_ : matrix(file, "output.weight", c.n_embd, c.n_vocab);
  const ArchitectureTraits& traits = architecture_traits(c.architecture);
  if (const gguf::TensorInfo* freqs = file.find_tensor("rope_freqs.weight")) {
    c.rope_freq_factors = vector_weights(file, freqs->name, c.rope_dim / 2);
    for (const float f : c.rope_freq_factors)
      if (!(f >= 1.0f && f <= 1e6f)) fail("rope_freqs.weight holds " + std::to_string(f) + ", outside [1, 1e6]");
  }
  model->plan_ = plan_for(c);  // the config is complete: a combination no executor runs is refused here
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights w;
    w.attn_norm = vector_weights(file, p + "attn_norm.weight", c.n_embd);
    if (c.layer_norm) {
      w.attn_norm_b = vector_weights(file, p + "attn_norm.bias", c.n_embd);
      w.ffn_norm_b = vector_weights(file, p + "ffn_norm.bias", c.n_embd);
      w.bo = vector_weights(file, p + "attn_output.bias", c.n_embd);
      w.b_up = vector_weights(file, p + "ffn_up.bias", c.n_ff);
      w.b_down = vector_weights(file, p + "ffn_down.bias", c.n_embd);
    }
    if (traits.fused && file.find_tensor(p + "attn_qkv.weight")) {
      if (file.find_tensor(p + "attn_q.weight"))
        fail("block " + std::to_string(l) + " has both attn_qkv.weight and attn_q.weight");
      // One matrix, rows [q; k; v]: three views of its rows.
      const WeightMatrix qkv = matrix(file, p + "attn_qkv.weight", c.n_embd, q_width + 2 * kv_width);
      w.wq = rows_of(qkv, 0, q_width);
      w.wk = rows_of(qkv, q_width, kv_width);
      w.wv = rows_of(qkv, q_width + kv_width, kv_width);
    } else {
      w.wq = matrix(file, p + "attn_q.weight", c.n_embd, q_width);
      w.wk = matrix(file, p + "attn_k.weight", c.n_embd, kv_width);
      w.wv = matrix(file, p + "attn_v.weight", c.n_embd, kv_width);
    }
    if (c.qkv_bias) {
      w.bq = vector_weights(file, p + "attn_q.bias", q_width);
      w.bk = vector_weights(file, p + "attn_k.bias", kv_width);
      w.bv = vector_weights(file, p + "attn_v.bias", kv_width);
    }
    if (c.qk_norm) {
      w.q_norm = vector_weights(file, p + "attn_q_norm.weight", c.head_dim);
      w.k_norm = vector_weights(file, p + "attn_k_norm.weight", c.head_dim);
    }
    w.wo = matrix(file, p + "attn_output.weight", q_width, c.n_embd);
    if (c.post_norms) w.attn_post_norm = vector_weights(file, p + "post_attention_norm.weight", c.n_embd);
    w.ffn_norm = vector_weights(file, p + "ffn_norm.weight", c.n_embd);
    if (traits.fused && !file.find_tensor(p + "ffn_gate.weight")) {
      // ffn_up holds [gate; up] (2 * n_ff rows).
      const WeightMatrix gate_up = matrix(file, p + "ffn_up.weight", c.n_embd, 2 * int64_t(c.n_ff));
      w.w_gate = rows_of(gate_up, 0, c.n_ff);
      w.w_up = rows_of(gate_up, c.n_ff, c.n_ff);
    } else {
      if (c.gated_ffn) w.w_gate = matrix(file, p + "ffn_gate.weight", c.n_embd, c.n_ff);
      w.w_up = matrix(file, p + "ffn_up.weight", c.n_embd, c.n_ff);
    }
    w.w_down = matrix(file, p + "ffn_down.weight", c.n_ff, c.n_embd);
    if (c.post_norms) w.ffn_post_norm = vector_weights(file, p + "post_ffw_norm.weight", c.n_embd);
    model->layers_.push_back(std::move(w));
  }
  for (const auto& t : file.tensors()) {
    model->parameter_count_ += t.n_elements;
    model->weight_bytes_ += t.n_bytes;
  }
  model->fingerprint_ = known_fingerprint ? *known_fingerprint : sha256(file.bytes());
  file.check_intact();  // the fingerprint and the copied norms read the pages
  return model;
}

void Model::check_weights_intact() const {
  if (file_) file_->check_intact();
}
bool Model::weights_intact() const { return !file_ || file_->intact(); }

std::string Model::fingerprint_hex() const { return to_hex(fingerprint_); }

std::shared_ptr<void> Model::resident_state(const std::function<std::shared_ptr<void>()>& make) const {
  // Held while `make` runs: two sessions starting at once upload once.
  std::lock_guard<std::mutex> lock(resident_mutex_);
  if (!resident_) {
    std::shared_ptr<void> made;
    try {
      made = make();
    } catch (...) {
      check_weights_intact();  // a copy that failed on a truncated file: say so
      throw;
    }
    check_weights_intact();  // a device copy of a truncated file is not kept
    resident_ = std::move(made);
  }
  return resident_;
}

}  // namespace kvg
