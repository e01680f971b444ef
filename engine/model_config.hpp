// Hyper-parameters of a decoder-only transformer, read from GGUF metadata.
// Architecture families differ only in data here (rope style, biases, norms,
// activation, attention window), never in a copied forward pass.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/ops.hpp"
#include "kernels/cpu/rope_table.hpp"

namespace kvg {

enum class FfnActivation {
  Silu,      // out = silu(gate) * up (llama, qwen, phi3)
  GeluTanh,  // out = gelu_tanh(gate) * up (gemma family)
};

struct ModelConfig {
  std::string architecture;  // "llama", ...
  std::string name;          // general.name, informational
  int n_layer = 0;
  int n_embd = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int n_ff = 0;
  int n_vocab = 0;
  int n_ctx = 0;             // the context length the model was trained for
  int rope_dim = 0;
  double rope_base = 10000.0;
  RopeStyle rope_style = RopeStyle::AdjacentPairs;
  float norm_eps = 1e-5f;
  bool tied_output = false;  // no output.weight: the head reuses token_embd
  bool qkv_bias = false;     // q/k/v projections add a bias vector (qwen2)

  // Rotary scaling. Per-pair frequency divisors (rope_freqs.weight, Llama
  // 3.1+; empty: none) and a linear position scale (rope.scaling.type =
  // linear: 1 / factor). Both apply to every layer, except the sliding layers
  // of a model with its own local base (below), which use neither.
  std::vector<float> rope_freq_factors;
  double rope_freq_scale = 1.0;
  // Sliding-window layers' own rope base (gemma3's local layers; 0: rope_base).
  double rope_base_local = 0.0;

  // starcoder2: LayerNorm with biases instead of RMSNorm (attention, FFN
  // and output norms), biases on the attention output and both FFN
  // matrices, and an ungated FFN: down(gelu(up x + b) ) + b.
  bool layer_norm = false;
  bool gated_ffn = true;
  bool embed_scale = false;  // token embeddings times sqrt(n_embd) (gemma)
  bool qk_norm = false;      // per-head RMSNorm of q and k before rope (qwen3, gemma3)
  bool post_norms = false;   // RMSNorm of the attention and FFN outputs before the residual (gemma2/3)
  FfnActivation ffn_activation = FfnActivation::Silu;
  float attn_scale = 0.0f;      // score = dot(q, k) * attn_scale
  float attn_softcap = 0.0f;    // > 0: score = tanh(score / cap) * cap (gemma2)
  float final_softcap = 0.0f;   // > 0: logit = tanh(logit / cap) * cap (gemma2)
  // Sliding-window attention: a sliding layer's query at p sees keys in
  // (p - sliding_window, p]. Layer l slides when sliding_window > 0 and
  // (sliding_period == 1 or l % sliding_period < sliding_period - 1).
  int sliding_window = 0;
  int sliding_period = 1;

  int kv_row_floats() const { return n_head_kv * head_dim; }  // per layer, per position, for K (same for V)
  bool layer_slides(int layer) const {
    return sliding_window > 0 && (sliding_period <= 1 || layer % sliding_period < sliding_period - 1);
  }
  // Keys visible to a query at p on `layer` start at p - window(layer) + 1 (0: all).
  int64_t window(int layer) const { return layer_slides(layer) ? sliding_window : 0; }
};

}  // namespace kvg
