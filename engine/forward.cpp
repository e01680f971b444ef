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
  std::vector<float> x, xn, q, k, v, attn, proj, gate, up;
  // Each token's rotation angles, [token][pair], for the global table and
  // for the sliding-window layers' own one.
  std::vector<float> cos, sin, cos_local, sin_local;
  // A pass's rows: each row's part, position and token; each part's KV in
  // the current layer; the rows whose logits are asked for, and a batch's
  // logits before they are split among the parts.
  std::vector<int32_t> row_part, row_token;
  std::vector<int64_t> row_position, logits_rows;
  std::vector<KvLayout> part_kv;
  std::vector<float> logits;

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
    for (std::vector<float>* angles : {&cos, &sin, &cos_local, &sin_local}) grow(*angles, c.rope_dim / 2);
  }

  size_t bytes() const {
    size_t floats = 0;
    for (const std::vector<float>* b : {&x, &xn, &q, &k, &v, &attn, &proj, &gate, &up, &cos, &sin, &cos_local, &sin_local})
      floats += b->capacity();
    return floats * sizeof(float);
  }
};

// A backend makes a Session per SQL call, and a first call's buffers come
// from fresh pages: faulting and zeroing them took a quarter of a 256-token
// prefill of a 656K-parameter model. So the last session to finish on a
// thread leaves its activations to the next, when they are small enough to
// keep while the thread idles. They hold no result: every value is written
// before it is read.
constexpr size_t kSpareScratchBytes = size_t(8) << 20;

std::unique_ptr<Session::Scratch>& Session::ScratchRelease::spare() {
  thread_local std::unique_ptr<Scratch> kept;
  return kept;
}

void Session::ScratchRelease::operator()(Scratch* scratch) const {
  std::unique_ptr<Scratch> finished(scratch);
  std::unique_ptr<Scratch>& kept = spare();
  if (finished->bytes() <= kSpareScratchBytes && (!kept || kept->bytes() < finished->bytes())) kept = std::move(finished);
}

// This session (the lead) runs the pass with its pool and buffers; every
// part's rows go through each matrix product together, and each row is
// attended over its own session's cache at its own position. Every step is
// row-independent, so a part's bits are those of its session alone.
void Session::forward_cpu(std::span<const ForwardRequest> parts) {
  const ModelConfig& c = model_->config();  // the shapes; what is computed is the plan's
  const ForwardPlan& plan = model_->plan();
  const Isa isa = options_.isa;
  const int64_t q_width = int64_t(c.n_head) * c.head_dim;
  const int64_t kv_width = c.kv_row_floats();
  const int group = c.n_head / c.n_head_kv;
  if (!scratch_) scratch_.reset(ScratchRelease::spare() ? ScratchRelease::spare().release() : new Scratch());
  Scratch& s = *scratch_;
  // Rows in order of the parts; each row's session, position and token.
  s.row_part.clear();
  s.row_position.clear();
  s.row_token.clear();
  for (size_t i = 0; i < parts.size(); ++i) {
    Session& part = *parts[i].session;
    const int64_t p0 = part.n_past();
    part.cache_.reserve(p0 + int64_t(parts[i].tokens.size()));
    for (size_t j = 0; j < parts[i].tokens.size(); ++j) {
      s.row_part.push_back(int32_t(i));
      s.row_position.push_back(p0 + int64_t(j));
      s.row_token.push_back(parts[i].tokens[j]);
    }
  }
  const int64_t n = int64_t(s.row_token.size());
  s.fit(c, n);
  auto cache_of = [&](int64_t t) -> KvCache& { return parts[size_t(s.row_part[size_t(t)])].session->cache_; };
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

  // Row-wise steps run token by token, spread over the pool in groups: a
  // token's row is its own, so the grouping changes no bit. A decode step's
  // one token runs inline.
  const int64_t tokens_per_task = std::max<int64_t>(8, (n + 4 * pool_.size() - 1) / (4 * pool_.size()));
  auto each_token = [&](auto&& step) {
    pool_.run(size_t((n + tokens_per_task - 1) / tokens_per_task), [&](size_t task) {
      const int64_t begin = int64_t(task) * tokens_per_task;
      for (int64_t t = begin; t < std::min(n, begin + tokens_per_task); ++t) step(t);
    });
  };
  const int pairs = c.rope_dim / 2;
  const bool local_table = std::any_of(plan.layers.begin(), plan.layers.begin() + c.n_layer,
                                       [](const LayerPlan& step) { return step.local_rope; });
  each_token([&](int64_t t) {
    float* x = &s.x[size_t(t * c.n_embd)];
    dequantize_row(model_->token_embedding(), s.row_token[size_t(t)], x);
    if (plan.embed_scale > 0) scale_inplace(x, plan.embed_scale, c.n_embd);
    // Once per forward, not per layer: every layer rotates a token alike.
    const int64_t position = s.row_position[size_t(t)];
    rope_.angles(position, &s.cos[size_t(t * pairs)], &s.sin[size_t(t * pairs)]);
    if (local_table) rope_local_.angles(position, &s.cos_local[size_t(t * pairs)], &s.sin_local[size_t(t * pairs)]);
  });

  const KvRowRounding kv_rounding = kv_rounding_of(options_.recipe.kv);
  for (int l = 0; l < c.n_layer; ++l) {
    const LayerWeights& w = model_->layers()[size_t(l)];
    const LayerPlan& step = plan.layers[size_t(l)];
    const float* cos = step.local_rope ? s.cos_local.data() : s.cos.data();
    const float* sin = step.local_rope ? s.sin_local.data() : s.sin.data();
    const AttentionExtras extras{step.window, step.attn_softcap};
    // Attention block.
    each_token([&](int64_t t) { norm_row(&s.x[size_t(t * c.n_embd)], w.attn_norm, w.attn_norm_b, &s.xn[size_t(t * c.n_embd)], isa); });
    weight_product(w.wq, s.xn.data(), c.n_embd, n, s.q.data(), q_width);
    weight_product(w.wk, s.xn.data(), c.n_embd, n, s.k.data(), kv_width);
    weight_product(w.wv, s.xn.data(), c.n_embd, n, s.v.data(), kv_width);
    each_token([&](int64_t t) {
      float* q = &s.q[size_t(t * q_width)];
      float* k = &s.k[size_t(t * kv_width)];
      float* v = &s.v[size_t(t * kv_width)];
      if (step.qkv_bias) {
        add_inplace(q, w.bq.data(), q_width);
        add_inplace(k, w.bk.data(), kv_width);
        add_inplace(v, w.bv.data(), kv_width);
      }
      if (step.qk_norm) {  // each head's q and k normalised on their own, before rotation
        for (int h = 0; h < c.n_head; ++h) rmsnorm(q + h * c.head_dim, w.q_norm.data(), c.head_dim, plan.norm_eps, q + h * c.head_dim, isa);
        for (int h = 0; h < c.n_head_kv; ++h) rmsnorm(k + h * c.head_dim, w.k_norm.data(), c.head_dim, plan.norm_eps, k + h * c.head_dim, isa);
      }
      apply_rope(q, c.n_head, c.head_dim, plan.rope.dim, cos + t * pairs, sin + t * pairs, plan.rope_style);
      apply_rope(k, c.n_head_kv, c.head_dim, plan.rope.dim, cos + t * pairs, sin + t * pairs, plan.rope_style);
      // Under a compact KV storage the cache holds the rounded rows and
      // attention reads them, so a graft of them is exact (engine/kv_storage.hpp).
      float* k_row = cache_of(t).k(l, s.row_position[size_t(t)]);
      float* v_row = cache_of(t).v(l, s.row_position[size_t(t)]);
      std::copy_n(k, kv_width, k_row);
      std::copy_n(v, kv_width, v_row);
      round_kv_rows(kv_rounding, k_row, c.n_head_kv, c.head_dim);
      round_kv_rows(kv_rounding, v_row, c.n_head_kv, c.head_dim);
    });
    s.part_kv.clear();
    for (const ForwardRequest& part : parts) {
      KvCache& cache = part.session->cache_;
      const MappedKv* mapped = part.session->mapped_.get();
      const int64_t held = cache.first_position();  // positions before it are mapped
      s.part_kv.push_back(KvLayout{cache.k(l, held), cache.v(l, held), kv_width, 0,
                                   mapped ? mapped->layer(l) : std::span<const KvSegment>()});
    }
    pool_.run(size_t(n * c.n_head), [&](size_t task) {
      const int64_t t = int64_t(task) / c.n_head;
      const int h = int(int64_t(task) % c.n_head);
      KvLayout head_kv = s.part_kv[size_t(s.row_part[size_t(t)])];
      head_kv.head_offset = int64_t(h / group) * c.head_dim;
      attention_head(&s.q[size_t(t * q_width + int64_t(h) * c.head_dim)], head_kv, c.head_dim,
                     s.row_position[size_t(t)], plan.attn_scale, &s.attn[size_t(t * q_width + int64_t(h) * c.head_dim)],
                     isa, extras);
    });
    weight_product(w.wo, s.attn.data(), q_width, n, s.proj.data(), c.n_embd);
    each_token([&](int64_t t) {
      if (step.out_bias) add_inplace(&s.proj[size_t(t * c.n_embd)], w.bo.data(), c.n_embd);
      add_residual(step.post_norms ? &w.attn_post_norm : nullptr, t, isa);
      // Feed-forward block.
      norm_row(&s.x[size_t(t * c.n_embd)], w.ffn_norm, w.ffn_norm_b, &s.xn[size_t(t * c.n_embd)], isa);
    });
    if (step.ffn == FfnKind::GeluBiased) {
      weight_product(w.w_up, s.xn.data(), c.n_embd, n, s.gate.data(), c.n_ff);
      each_token([&](int64_t t) {
        float* g = &s.gate[size_t(t * c.n_ff)];
        add_inplace(g, w.b_up.data(), c.n_ff);
        gelu_inplace(g, c.n_ff);
      });
    } else {
      weight_product(w.w_gate, s.xn.data(), c.n_embd, n, s.gate.data(), c.n_ff);
      weight_product(w.w_up, s.xn.data(), c.n_embd, n, s.up.data(), c.n_ff);
      each_token([&](int64_t t) {
        float* g = &s.gate[size_t(t * c.n_ff)];
        if (step.ffn == FfnKind::GeGluTanh)
          geglu(g, &s.up[size_t(t * c.n_ff)], g, c.n_ff);
        else
          swiglu(g, &s.up[size_t(t * c.n_ff)], g, c.n_ff, isa);
      });
    }
    weight_product(w.w_down, s.gate.data(), c.n_ff, n, s.proj.data(), c.n_embd);
    each_token([&](int64_t t) {
      if (step.ffn == FfnKind::GeluBiased) add_inplace(&s.proj[size_t(t * c.n_embd)], w.b_down.data(), c.n_embd);
      add_residual(step.post_norms ? &w.ffn_post_norm : nullptr, t, isa);
    });
    // The file truncated under the call: this layer read zeros, stop here.
    model_->check_weights_intact();
    for (const ForwardRequest& part : parts)
      if (part.session->mapped_) part.session->mapped_->check_intact();
  }

  // The rows whose logits are asked for, in order of the parts, normed
  // into xn's first rows; one product with the output matrix for them all.
  s.logits_rows.clear();
  int64_t row = 0;
  for (const ForwardRequest& part : parts) {
    const int64_t rows = int64_t(part.tokens.size());
    if (part.logits && part.which != LogitsFor::None)
      for (int64_t t = part.which == LogitsFor::All ? row : row + rows - 1; t < row + rows; ++t) s.logits_rows.push_back(t);
    row += rows;
  }
  const int64_t out_rows = int64_t(s.logits_rows.size());
  if (out_rows == 0) return;
  pool_.run(size_t(out_rows), [&](size_t k) {
    norm_row(&s.x[size_t(s.logits_rows[k] * c.n_embd)], model_->output_norm(), model_->output_norm_bias(),
             &s.xn[k * size_t(c.n_embd)], isa);
  });
  // A part alone receives its logits in place; a batch's are split after.
  const bool alone = parts.size() == 1;
  std::vector<float>& out = alone ? *parts[0].logits : s.logits;
  out.resize(size_t(out_rows * c.n_vocab));
  weight_product(model_->output(), s.xn.data(), c.n_embd, out_rows, out.data(), c.n_vocab);
  if (plan.final_softcap > 0.0f) softcap_inplace(out.data(), plan.final_softcap, out_rows * c.n_vocab);
  model_->check_weights_intact();
  if (alone) return;
  int64_t taken = 0;
  for (const ForwardRequest& part : parts) {
    if (!part.logits || part.which == LogitsFor::None) continue;
    const int64_t rows = part.which == LogitsFor::All ? int64_t(part.tokens.size()) : 1;
    part.logits->assign(out.begin() + taken * c.n_vocab, out.begin() + (taken + rows) * c.n_vocab);
    taken += rows;
  }
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

// Token t's x += proj; with a post-norm x += rmsnorm(proj) instead, the norm
// written to t's xn first (free between the blocks).
void Session::add_residual(const std::vector<float>* post_norm, int64_t t, Isa isa) {
  const ModelConfig& c = model_->config();
  Scratch& s = *scratch_;
  const float* delta = &s.proj[size_t(t * c.n_embd)];
  if (post_norm) {
    rmsnorm(delta, post_norm->data(), c.n_embd, model_->plan().norm_eps, &s.xn[size_t(t * c.n_embd)], isa);
    delta = &s.xn[size_t(t * c.n_embd)];
  }
  add_inplace(&s.x[size_t(t * c.n_embd)], delta, c.n_embd);
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
