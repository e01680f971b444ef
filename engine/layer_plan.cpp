#include "engine/layer_plan.hpp"

#include <cmath>

#include "common/error.hpp"
#include "engine/model_config.hpp"

namespace kvg {

ForwardPlan plan_for(const ModelConfig& c) {
  // LayerNorm comes with biases on the attention output and on both FFN
  // matrices, and an ungated FFN (starcoder2); no family mixes them with
  // the others' RMSNorm and gated FFN, and no executor implements a mix.
  if (c.layer_norm == c.gated_ffn)
    throw Error(ErrorCode::Unsupported, std::string("architecture '") + c.architecture + "' combines " +
                                            (c.layer_norm ? "LayerNorm with a gated FFN" : "RMSNorm with an ungated FFN") +
                                            ", which no executor implements");
  ForwardPlan p;
  p.embed_scale = c.embed_scale ? std::sqrt(float(c.n_embd)) : 0.0f;
  p.norm = c.layer_norm ? NormKind::LayerWithBias : NormKind::Rms;
  p.norm_eps = c.norm_eps;
  p.rope_style = c.rope_style;
  p.rope = RopePlan{c.rope_dim, c.rope_base, c.rope_freq_factors, c.rope_freq_scale};
  // A sliding layer's own base comes without the global scaling (model_config.hpp).
  p.rope_local = c.rope_base_local > 0 ? RopePlan{c.rope_dim, c.rope_base_local, {}, 1.0} : p.rope;
  p.attn_scale = c.attn_scale;
  p.final_softcap = c.final_softcap;
  const FfnKind ffn = !c.gated_ffn                                    ? FfnKind::GeluBiased
                      : c.ffn_activation == FfnActivation::GeluTanh ? FfnKind::GeGluTanh
                                                                      : FfnKind::SwiGlu;
  for (int l = 0; l < c.n_layer; ++l)
    p.layers.push_back(LayerPlan{c.qkv_bias, c.qk_norm, c.layer_slides(l) && c.rope_base_local > 0, c.window(l),
                                 c.attn_softcap, c.layer_norm, c.post_norms, ffn});
  return p;
}

}  // namespace kvg
