// Hyper-parameters of a decoder-only transformer, read from GGUF metadata.
// Architecture families differ only in data here (rope style, biases, norms),
// never in a copied forward pass.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/cpu/ops.hpp"

namespace kvg {

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

  int kv_row_floats() const { return n_head_kv * head_dim; }  // per layer, per position, for K (same for V)
};

}  // namespace kvg
