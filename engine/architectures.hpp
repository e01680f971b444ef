// The architecture families the engine runs, as data: what each adds to the
// one forward pass (engine/forward.cpp), which GGUF keys and tensors it
// reads (engine/model.cpp), and so what the refusals accept
// (engine/model_refusals.cpp) and what the synthetic-model generator writes
// (tools/synth_model.cpp). Nothing else asks a family's name: a family is a
// row here. Semantics follow llama.cpp's reading of the same GGUF files;
// where llama.cpp hard-codes a value (gemma3's local rope base, gemma2/3's
// query scale of the largest model, phi3's windows before the key existed),
// so does this table.
#pragma once

#include <span>
#include <string>

#include "engine/model_config.hpp"

namespace kvg {

// A sliding window llama.cpp assumes for files of a family written before
// its attention.sliding_window key existed, recognised by their shape.
struct AssumedWindow {
  int n_ctx = 0;    // the file's context_length
  int n_layer = 0;  // the file's block_count; 0: any
  int window = 0;   // the window such a file gets
};

// Phi-3 files without the key: mini/medium 4k models slide over 2047
// positions, the 128k models not at all (a window as long as the context).
inline constexpr AssumedWindow kPhi3AssumedWindows[] = {
    {.n_ctx = 4096, .n_layer = 32, .window = 2047},
    {.n_ctx = 4096, .n_layer = 40, .window = 2047},
    {.n_ctx = 131072, .n_layer = 0, .window = 131072},
};

// Every field has a default meaning "the family does not have it", so a row
// names only what its family adds.
struct ArchitectureTraits {
  const char* name = "";
  RopeStyle rope_style = RopeStyle::AdjacentPairs;
  FfnActivation activation = FfnActivation::Silu;
  bool qkv_bias = false;     // attn_{q,k,v}.bias (qwen2, starcoder2)
  bool qk_norm = false;      // attn_q_norm / attn_k_norm (qwen3, gemma3)
  bool post_norms = false;   // post_attention_norm / post_ffw_norm (gemma2, gemma3)
  bool embed_scale = false;  // embeddings times sqrt(n_embd) (gemma family)
  bool tied_head = false;    // its files carry no output.weight: the head is token_embd (gemma family)
  bool fused = false;        // attn_qkv, and ffn_up holding [gate; up] without ffn_gate (phi3)
  bool softcap = false;      // attn_/final_logit_softcapping keys read when present (gemma2, gemma3)
  // The soft-caps its released models carry (0: they carry none); the
  // generator writes them, the loader reads whatever the file says.
  float shipped_attn_softcap = 0.0f;
  float shipped_final_softcap = 0.0f;
  int sliding_period = 0;    // 0: no sliding window; else ModelConfig::sliding_period
  int default_window = 0;    // window when the GGUF has no attention.sliding_window (0: required)
  std::span<const AssumedWindow> assumed_windows = {};  // before default_window, when the key is absent
  bool rope_freqs = false;   // rope_freqs.weight (Llama 3.1+)
  double local_rope_base = 0.0;  // sliding layers' own rope base (gemma3), 0: none
  int largest_n_layer = 0;   // gemma2/3: this depth scales queries by 1/sqrt(n_embd / n_head)
  bool layer_norm = false;   // starcoder2: LayerNorm + biases everywhere, ungated GELU FFN
};

inline constexpr ArchitectureTraits kArchitectures[] = {
    {.name = "llama", .rope_style = RopeStyle::AdjacentPairs, .activation = FfnActivation::Silu, .rope_freqs = true},
    {.name = "qwen2", .rope_style = RopeStyle::SplitHalves, .activation = FfnActivation::Silu, .qkv_bias = true},
    {.name = "qwen3", .rope_style = RopeStyle::SplitHalves, .activation = FfnActivation::Silu, .qk_norm = true},
    {.name = "phi3",
     .rope_style = RopeStyle::SplitHalves,
     .activation = FfnActivation::Silu,
     .fused = true,
     .sliding_period = 1,
     .assumed_windows = kPhi3AssumedWindows},
    {.name = "gemma",
     .rope_style = RopeStyle::SplitHalves,
     .activation = FfnActivation::GeluTanh,
     .embed_scale = true,
     .tied_head = true},
    {.name = "gemma2",
     .rope_style = RopeStyle::SplitHalves,
     .activation = FfnActivation::GeluTanh,
     .post_norms = true,
     .embed_scale = true,
     .tied_head = true,
     .softcap = true,
     .shipped_attn_softcap = 50.0f,
     .shipped_final_softcap = 30.0f,
     .sliding_period = 2,
     .default_window = 4096,
     .largest_n_layer = 46},
    {.name = "gemma3",
     .rope_style = RopeStyle::SplitHalves,
     .activation = FfnActivation::GeluTanh,
     .qk_norm = true,
     .post_norms = true,
     .embed_scale = true,
     .tied_head = true,
     .softcap = true,
     .sliding_period = 6,
     .local_rope_base = 10000.0,
     .largest_n_layer = 62},
    {.name = "starcoder2",
     .rope_style = RopeStyle::SplitHalves,
     .activation = FfnActivation::GeluTanh,
     .qkv_bias = true,
     .layer_norm = true},
};

// Throws Error(Unsupported) naming the architecture and the supported list.
const ArchitectureTraits& architecture_traits(const std::string& architecture);

// The window a file of `traits`'s family gets when it has no
// attention.sliding_window key (0: none can be derived).
constexpr int assumed_window(const ArchitectureTraits& traits, int n_layer, int n_ctx) {
  for (const AssumedWindow& known : traits.assumed_windows)
    if (known.n_ctx == n_ctx && (known.n_layer == 0 || known.n_layer == n_layer)) return known.window;
  return traits.default_window;
}

}  // namespace kvg
