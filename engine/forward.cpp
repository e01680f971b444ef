// The CPU executor: the model's plan (engine/layer_plan.hpp) run with the
// kernels of kernels/cpu, under the session's recipe (engine/recipe.hpp,
// docs/recipe.md). Every step is row-independent: a token's values depend
// only on its own inputs and the KV rows before it, so batching, chunking
// and threading cannot change a bit (docs/design.md, recipe rule 1).
#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "engine/mapped_kv.hpp"
#include "engine/session.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/dequantize.hpp"
#include "kernels/cpu/kv_rounding.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/matmul_q8.hpp"
#include "kernels/cpu/ops.hpp"

namespace kvg {

// Every step of a plan runs here: a new entry of LayerPlan or ForwardPlan
// changes their size and stops the build until it runs here too.
static_assert(sizeof(LayerPlan) == 32 && sizeof(ForwardPlan) == 152,
              "a new plan entry (engine/layer_plan.hpp): run it in the CPU executor");

// Activation buffers for one forward call, reused across calls.
struct Session::Scratch {
  std::vector<float> x, xn, q, k, v, attn, proj, gate, up, cos, sin;

  void fit(const ModelConfig& c, int64_t n) {
    auto grow = [n](std::vector<float>& b, int64_t width) {
      if (int64_t(b.size()) < n * width) b.resize(size_t(n * width));
    };
    const int64_t q_width = int64_t(c.n_head) * c.head_dim;
    grow(x, c.n_embd);
    grow(xn, c.n_embd);
    grow(q, q_width);
    grow(k, c.kv_row_floats());
    grow(v, c.kv_row_floats());
    grow(attn, q_width);
    grow(proj, std::max<int64_t>(c.n_embd, q_width));
    grow(gate, c.n_ff);
    grow(up, c.n_ff);
    grow(cos, c.rope_dim / 2);
    grow(sin, c.rope_dim / 2);
  }
};

void Session::forward_cpu(std::span<const int32_t> tokens, LogitsFor which, std::vector<float>* logits) {
  const ModelConfig& c = model_->config();  // the shapes; what is computed is the plan's
  const ForwardPlan& plan = model_->plan();
  const Isa isa = options_.isa;
  const int64_t n = int64_t(tokens.size());
  const int64_t p0 = n_past();
  const int64_t q_width = int64_t(c.n_head) * c.head_dim;
  const int64_t kv_width = c.kv_row_floats();
  const int group = c.n_head / c.n_head_kv;
  cache_.reserve(p0 + n);
  if (!scratch_) scratch_ = std::make_shared<Scratch>();
  Scratch& s = *scratch_;
  s.fit(c, n);
  // Every product with a weight matrix goes through here, so the recipe's
  // arithmetic is chosen in one place: q8-portable-v1 quantizes activations
  // against block-quantized matrices (matmul_q8 itself computes F32/F16/BF16
  // matrices as matmul does).
  const bool q8 = options_.recipe.arithmetic == Arithmetic::Q8;
  auto weight_product = [&](const WeightMatrix& m, const float* in, int64_t in_stride, int64_t tokens, float* out,
                            int64_t out_stride) {
    if (q8)
      matmul_q8(m, in, in_stride, tokens, out, out_stride, pool_, isa);
    else
      matmul(m, in, in_stride, tokens, out, out_stride, pool_, isa);
  };

  for (int64_t t = 0; t < n; ++t) dequantize_row(model_->token_embedding(), tokens[size_t(t)], &s.x[size_t(t * c.n_embd)]);
  if (plan.embed_scale > 0) scale_inplace(s.x.data(), plan.embed_scale, n * c.n_embd);

  for (int l = 0; l < c.n_layer; ++l) {
    const LayerWeights& w = model_->layers()[size_t(l)];
    const LayerPlan& step = plan.layers[size_t(l)];
    const RopeTable& rope = step.local_rope ? rope_local_ : rope_;
    const AttentionExtras extras{step.window, step.attn_softcap};
    // Attention block.
    for (int64_t t = 0; t < n; ++t) norm_row(&s.x[size_t(t * c.n_embd)], w.attn_norm, w.attn_norm_b, &s.xn[size_t(t * c.n_embd)], isa);
    weight_product(w.wq, s.xn.data(), c.n_embd, n, s.q.data(), q_width);
    weight_product(w.wk, s.xn.data(), c.n_embd, n, s.k.data(), kv_width);
    weight_product(w.wv, s.xn.data(), c.n_embd, n, s.v.data(), kv_width);
    if (step.qkv_bias)
      for (int64_t t = 0; t < n; ++t) {
        add_inplace(&s.q[size_t(t * q_width)], w.bq.data(), q_width);
        add_inplace(&s.k[size_t(t * kv_width)], w.bk.data(), kv_width);
        add_inplace(&s.v[size_t(t * kv_width)], w.bv.data(), kv_width);
      }
    if (step.qk_norm)  // each head's q and k normalised on their own, before rotation
      for (int64_t t = 0; t < n; ++t) {
        for (int h = 0; h < c.n_head; ++h) {
          float* qh = &s.q[size_t(t * q_width + int64_t(h) * c.head_dim)];
          rmsnorm(qh, w.q_norm.data(), c.head_dim, plan.norm_eps, qh, isa);
        }
        for (int h = 0; h < c.n_head_kv; ++h) {
          float* kh = &s.k[size_t(t * kv_width + int64_t(h) * c.head_dim)];
          rmsnorm(kh, w.k_norm.data(), c.head_dim, plan.norm_eps, kh, isa);
        }
      }
    for (int64_t t = 0; t < n; ++t) {
      rope.angles(p0 + t, s.cos.data(), s.sin.data());
      apply_rope(&s.q[size_t(t * q_width)], c.n_head, c.head_dim, plan.rope.dim, s.cos.data(), s.sin.data(), plan.rope_style);
      apply_rope(&s.k[size_t(t * kv_width)], c.n_head_kv, c.head_dim, plan.rope.dim, s.cos.data(), s.sin.data(), plan.rope_style);
      std::copy_n(&s.k[size_t(t * kv_width)], kv_width, cache_.k(l, p0 + t));
      std::copy_n(&s.v[size_t(t * kv_width)], kv_width, cache_.v(l, p0 + t));
    }
    // Under a compact KV storage the cache holds the rounded rows and attention
    // reads them, so a graft of them is exact (engine/kv_storage.hpp).
    round_kv_rows(kv_rounding_of(options_.recipe.kv), cache_.k(l, p0), n * c.n_head_kv, c.head_dim);
    round_kv_rows(kv_rounding_of(options_.recipe.kv), cache_.v(l, p0), n * c.n_head_kv, c.head_dim);
    const int64_t held = cache_.first_position();  // positions before it are mapped
    const KvLayout layer_kv{cache_.k(l, held), cache_.v(l, held), kv_width, 0,
                            mapped_ ? mapped_->layer(l) : std::span<const KvSegment>()};
    pool_.run(size_t(n * c.n_head), [&](size_t task) {
      const int64_t t = int64_t(task) / c.n_head;
      const int h = int(int64_t(task) % c.n_head);
      KvLayout head_kv = layer_kv;
      head_kv.head_offset = int64_t(h / group) * c.head_dim;
      attention_head(&s.q[size_t(t * q_width + int64_t(h) * c.head_dim)], head_kv, c.head_dim, p0 + t, plan.attn_scale,
                     &s.attn[size_t(t * q_width + int64_t(h) * c.head_dim)], isa, extras);
    });
    weight_product(w.wo, s.attn.data(), q_width, n, s.proj.data(), c.n_embd);
    if (step.out_bias) add_bias(s.proj.data(), w.bo, n);
    add_residual(step.post_norms ? &w.attn_post_norm : nullptr, n, isa);

    // Feed-forward block.
    for (int64_t t = 0; t < n; ++t) norm_row(&s.x[size_t(t * c.n_embd)], w.ffn_norm, w.ffn_norm_b, &s.xn[size_t(t * c.n_embd)], isa);
    if (step.ffn == FfnKind::GeluBiased) {
      weight_product(w.w_up, s.xn.data(), c.n_embd, n, s.gate.data(), c.n_ff);
      add_bias(s.gate.data(), w.b_up, n);
      gelu_inplace(s.gate.data(), n * c.n_ff);
    } else {
      weight_product(w.w_gate, s.xn.data(), c.n_embd, n, s.gate.data(), c.n_ff);
      weight_product(w.w_up, s.xn.data(), c.n_embd, n, s.up.data(), c.n_ff);
      // Element-wise, so each token's row can go to any thread.
      pool_.run(size_t(n), [&](size_t task) {
        const int64_t t = int64_t(task);
        float* g = &s.gate[size_t(t * c.n_ff)];
        if (step.ffn == FfnKind::GeGluTanh)
          geglu(g, &s.up[size_t(t * c.n_ff)], g, c.n_ff);
        else
          swiglu(g, &s.up[size_t(t * c.n_ff)], g, c.n_ff, isa);
      });
    }
    weight_product(w.w_down, s.gate.data(), c.n_ff, n, s.proj.data(), c.n_embd);
    if (step.ffn == FfnKind::GeluBiased) add_bias(s.proj.data(), w.b_down, n);
    add_residual(step.post_norms ? &w.ffn_post_norm : nullptr, n, isa);
    // The file truncated under the call: this layer read zeros, stop here.
    model_->check_weights_intact();
    if (mapped_) mapped_->check_intact();
  }

  if (which == LogitsFor::None || !logits) return;
  const int64_t first = which == LogitsFor::All ? 0 : n - 1;
  const int64_t rows = n - first;
  for (int64_t t = first; t < n; ++t)
    norm_row(&s.x[size_t(t * c.n_embd)], model_->output_norm(), model_->output_norm_bias(),
             &s.xn[size_t((t - first) * c.n_embd)], isa);
  logits->resize(size_t(rows * c.n_vocab));
  weight_product(model_->output(), s.xn.data(), c.n_embd, rows, logits->data(), c.n_vocab);
  if (plan.final_softcap > 0.0f) softcap_inplace(logits->data(), plan.final_softcap, rows * c.n_vocab);
  model_->check_weights_intact();
}

// The block and output norms: RMSNorm, or LayerNorm with its bias.
void Session::norm_row(const float* x, const std::vector<float>& w, const std::vector<float>& b, float* y, Isa isa) const {
  const ForwardPlan& plan = model_->plan();
  const int n_embd = model_->config().n_embd;
  if (plan.norm == NormKind::LayerWithBias)
    layernorm(x, w.data(), b.data(), n_embd, plan.norm_eps, y, isa);
  else
    rmsnorm(x, w.data(), n_embd, plan.norm_eps, y, isa);
}

// rows[t * bias.size() + i] += bias[i] for n rows.
void Session::add_bias(float* rows, const std::vector<float>& bias, int64_t n) const {
  const int64_t width = int64_t(bias.size());
  for (int64_t t = 0; t < n; ++t) add_inplace(rows + t * width, bias.data(), width);
}

// x += proj for n tokens; with a post-norm x += rmsnorm(proj) instead, the
// norm written to xn first (free between the blocks).
void Session::add_residual(const std::vector<float>* post_norm, int64_t n, Isa isa) {
  const ModelConfig& c = model_->config();
  Scratch& s = *scratch_;
  for (int64_t t = 0; t < n; ++t) {
    const float* delta = &s.proj[size_t(t * c.n_embd)];
    if (post_norm) {
      rmsnorm(delta, post_norm->data(), c.n_embd, model_->plan().norm_eps, &s.xn[size_t(t * c.n_embd)], isa);
      delta = &s.xn[size_t(t * c.n_embd)];
    }
    add_inplace(&s.x[size_t(t * c.n_embd)], delta, c.n_embd);
  }
}

// Mapped positions are read in place by this executor's attention
// (kernels/cpu/attention.hpp's KvLayout segments).
void Session::map_prefix(std::shared_ptr<const MappedKv> mapped) {
  if (cuda_)
    throw Error(ErrorCode::Unsupported, "mapped KV runs on the CPU, and this session runs on CUDA: use device cpu "
                                        "(or graft the chain into the resident cache)");
  if (n_past() != 0)
    throw Error(ErrorCode::InvalidArgument, "mapped KV starts at position 0, but the context already holds " +
                                                std::to_string(n_past()) + " positions");
  check_tokens(mapped->tokens());
  cache_.hold_from(mapped->n_tokens());
  tokens_ = mapped->tokens();
  mapped_ = std::move(mapped);
}

}  // namespace kvg
