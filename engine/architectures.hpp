// The architecture families the engine runs, as data: what each adds to the
// one forward pass (engine/forward.cpp), which GGUF keys and tensors it
// reads (engine/model.cpp), and so what the refusals accept
// (engine/model_refusals.cpp). Semantics follow llama.cpp's reading of the
// same GGUF files; where llama.cpp hard-codes a value (gemma3's local rope
// base, gemma2/3's query scale of the largest model), so does this table.
#pragma once

#include <string>

#include "engine/model_config.hpp"

namespace kvg {

struct ArchitectureTraits {
  const char* name;
  RopeStyle rope_style;
  bool qkv_bias;         // attn_{q,k,v}.bias (qwen2)
  bool qk_norm;          // attn_q_norm / attn_k_norm (qwen3, gemma3)
  bool post_norms;       // post_attention_norm / post_ffw_norm (gemma2, gemma3)
  bool embed_scale;      // embeddings times sqrt(n_embd) (gemma family)
  FfnActivation activation;
  bool fused;            // attn_qkv, and ffn_up holding [gate; up] without ffn_gate (phi3)
  bool softcap;          // attn_/final_logit_softcapping keys (gemma2; gemma3 if present)
  int sliding_period;    // 0: no sliding window; else ModelConfig::sliding_period
  int default_window;    // window when the GGUF has no attention.sliding_window (0: required)
  bool rope_freqs;       // rope_freqs.weight (Llama 3.1+)
  double local_rope_base;  // sliding layers' own rope base (gemma3), 0: none
  int largest_n_layer;   // gemma2/3: this depth scales queries by 1/sqrt(n_embd / n_head)
  bool layer_norm = false;  // starcoder2: LayerNorm + biases everywhere, ungated GELU FFN
};

inline constexpr ArchitectureTraits kArchitectures[] = {
    // name     rope                      bias   qknorm post   embed  activation               fused  softcap swa default ropefreqs local  largest
    {"llama",  RopeStyle::AdjacentPairs, false, false, false, false, FfnActivation::Silu,     false, false,  0, 0,    true,  0.0,     0},
    {"qwen2",  RopeStyle::SplitHalves,   true,  false, false, false, FfnActivation::Silu,     false, false,  0, 0,    false, 0.0,     0},
    {"qwen3",  RopeStyle::SplitHalves,   false, true,  false, false, FfnActivation::Silu,     false, false,  0, 0,    false, 0.0,     0},
    {"phi3",   RopeStyle::SplitHalves,   false, false, false, false, FfnActivation::Silu,     true,  false,  1, 0,    false, 0.0,     0},
    {"gemma",  RopeStyle::SplitHalves,   false, false, false, true,  FfnActivation::GeluTanh, false, false,  0, 0,    false, 0.0,     0},
    {"gemma2", RopeStyle::SplitHalves,   false, false, true,  true,  FfnActivation::GeluTanh, false, true,   2, 4096, false, 0.0,     46},
    {"gemma3", RopeStyle::SplitHalves,   false, true,  true,  true,  FfnActivation::GeluTanh, false, true,   6, 0,    false, 10000.0, 62},
    {"starcoder2", RopeStyle::SplitHalves, true, false, false, false, FfnActivation::GeluTanh, false, false, 0, 0,   false, 0.0,     0, true},
};

// Throws Error(Unsupported) naming the architecture and the supported list.
const ArchitectureTraits& architecture_traits(const std::string& architecture);

}  // namespace kvg
