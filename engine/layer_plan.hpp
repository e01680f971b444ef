// The forward pass as data: what each layer of a model computes, decided once
// from its ModelConfig when the model is loaded (Model::plan()). The CPU
// executor (engine/forward.cpp) and the CUDA executor
// (engine/cuda_forward.cpp) both walk this plan and implement primitives
// only: neither asks which family a model is. A family is a row of
// engine/architectures.hpp that sets ModelConfig fields; plan_for() turns
// every field into what it means for the computation
// (tests/engine/test_layer_plan.cpp fails for a field that changes no plan
// and is not a shape), and every executor runs every entry: each names the
// entries it runs in a static_assert of runs_every_entry (below), so a new
// entry stops the build until each executor runs it
// (tests/compile_fail/ proves that it does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/ops.hpp"
#include "kernels/cpu/rope_table.hpp"

namespace kvg {

struct ModelConfig;

// The block norms before attention and FFN, and the output norm. The q/k
// norms and post-norms are RMSNorm whatever this says.
enum class NormKind {
  Rms,
  LayerWithBias,  // LayerNorm, then a bias (starcoder2)
};

enum class FfnKind {
  SwiGlu,       // down(silu(gate x) * up x)
  GeGluTanh,    // down(gelu_tanh(gate x) * up x)
  GeluBiased,   // down(gelu(up x + b_up)) + b_down, no gate
};

// A rotary table's parameters (kernels/cpu/rope_table.hpp).
struct RopePlan {
  int dim = 0;
  double base = 10000.0;
  std::vector<float> freq_factors;  // empty: all 1
  double freq_scale = 1.0;

  RopeTable table() const { return RopeTable(dim, base, freq_factors, freq_scale); }
  bool operator==(const RopePlan&) const = default;
};

struct LayerPlan {
  bool qkv_bias = false;      // q, k and v each add a bias vector
  bool qk_norm = false;       // each head of q and k RMS-normed before rotation
  bool local_rope = false;    // rotated by ForwardPlan::rope_local, not ::rope
  int64_t window = 0;         // > 0: a query at p sees keys (p - window, p]
  float attn_softcap = 0.0f;  // > 0: score = tanh(score / cap) * cap
  bool out_bias = false;      // the attention output projection adds a bias
  bool post_norms = false;    // attention and FFN outputs RMS-normed before the residual
  FfnKind ffn = FfnKind::SwiGlu;

  bool operator==(const LayerPlan&) const = default;
};

struct ForwardPlan {
  float embed_scale = 0.0f;  // > 0: token embeddings times it
  NormKind norm = NormKind::Rms;
  float norm_eps = 1e-5f;    // every norm's epsilon
  RopeStyle rope_style = RopeStyle::AdjacentPairs;
  RopePlan rope;             // global layers
  RopePlan rope_local;       // layers with local_rope
  float attn_scale = 0.0f;   // score = dot(q, k) * attn_scale
  std::vector<LayerPlan> layers;
  float final_softcap = 0.0f;  // > 0: logit = tanh(logit / cap) * cap

  bool operator==(const ForwardPlan&) const = default;
};

ForwardPlan plan_for(const ModelConfig& config);

// The executors' guard. An executor states
//   static_assert(runs_every_entry<LayerPlan, &LayerPlan::qkv_bias, ...>, "...");
// naming every entry it runs. The compiler counts the plan's members (an
// aggregate takes one initializer per member, so it accepts as many
// initializers as it has members and no more), which no padding can hide,
// unlike sizeof: one more entry (a value, as every entry is) fails the
// assertion.
namespace plan_guard {

// Converts to any member's type; only ever named in unevaluated code.
struct AnyEntry {
  template <class T>
  operator T() const;
};

template <class Plan, class... Entries>
consteval size_t entry_count() {
  if constexpr (requires { Plan{Entries{}..., AnyEntry{}}; })
    return entry_count<Plan, Entries..., AnyEntry>();
  else
    return sizeof...(Entries);
}

template <class Class, class Member>
Class owner_of(Member Class::*);  // declared only: decltype names the class

}  // namespace plan_guard

template <class Plan, auto... Entries>
inline constexpr bool runs_every_entry =
    (std::is_same_v<decltype(plan_guard::owner_of(Entries)), Plan> && ...) &&
    sizeof...(Entries) == plan_guard::entry_count<Plan>();

}  // namespace kvg
