// The CPU executor: the model's plan (engine/layer_plan.hpp) run with the
// kernels of kernels/cpu, under the session's recipe (engine/recipe.hpp,
// docs/recipe.md). Every step is row-independent: a token's values depend
// only on its own inputs and the KV rows before it, so batching, chunking
// and threading cannot change a bit (docs/design.md, recipe rule 1).
#include <algorithm>
#include <array>
#include <cmath>

#include "common/error.hpp"
#include "engine/mapped_kv.hpp"
#include "engine/pass_threads.hpp"
#include "engine/session.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/dequantize.hpp"
#include "kernels/cpu/kv_rounding.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/matmul_q8.hpp"
#include "kernels/cpu/ops.hpp"

namespace kvg {

// Every step of a plan runs here, and these name each entry run: a new
// entry of LayerPlan or ForwardPlan stops the build until it runs here too
// and is named here (engine/layer_plan.hpp, runs_every_entry).
static_assert(runs_every_entry<LayerPlan, &LayerPlan::qkv_bias, &LayerPlan::qk_norm, &LayerPlan::local_rope,
                               &LayerPlan::window, &LayerPlan::attn_softcap, &LayerPlan::out_bias,
                               &LayerPlan::post_norms, &LayerPlan::ffn>,
              "a new LayerPlan entry (engine/layer_plan.hpp): run it in the CPU executor, then name it here");
static_assert(runs_every_entry<ForwardPlan, &ForwardPlan::embed_scale, &ForwardPlan::norm, &ForwardPlan::norm_eps,
                               &ForwardPlan::rope_style, &ForwardPlan::rope, &ForwardPlan::rope_local,
                               &ForwardPlan::attn_scale, &ForwardPlan::layers, &ForwardPlan::final_softcap>,
              "a new ForwardPlan entry (engine/layer_plan.hpp): run it in the CPU executor, then name it here");

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

  class Pass;  // the executor's steps, below
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

// One pass of the CPU executor over a batch's rows: the steps, in their
// order, of Session::forward_cpu. Nested in Scratch, so in Session: it
// reaches every part's KV cache and the lead's norms.
class Session::Scratch::Pass {
 public:
  Pass(Session& lead, std::span<const ForwardRequest> parts)
      : lead_(lead), parts_(parts), pool_(pool_for(lead, parts)), c(lead.model_->config()), plan(lead.model_->plan()),
        isa(lead.options_.isa), s(*lead.scratch_), n(gather_rows(parts, s)) {
    s.fit(c, n);
  }

  // Each row's token embedding and its rotation angles.
  void embed() {
    const bool local_table = std::any_of(plan.layers.begin(), plan.layers.begin() + c.n_layer,
                                         [](const LayerPlan& step) { return step.local_rope; });
    each_token([&](int64_t t) {
      float* x = &s.x[size_t(t * c.n_embd)];
      dequantize_row(lead_.model_->token_embedding(), s.row_token[size_t(t)], x);
      if (plan.embed_scale > 0) scale_inplace(x, plan.embed_scale, c.n_embd);
      // Once per forward, not per layer: every layer rotates a token alike.
      const int64_t position = s.row_position[size_t(t)];
      lead_.rope_.angles(position, &s.cos[size_t(t * pairs)], &s.sin[size_t(t * pairs)]);
      if (local_table)
        lead_.rope_local_.angles(position, &s.cos_local[size_t(t * pairs)], &s.sin_local[size_t(t * pairs)]);
    });
  }

  void layer(int l) {
    const LayerWeights& w = lead_.model_->layers()[size_t(l)];
    const LayerPlan& step = plan.layers[size_t(l)];
    attention(l, w, step);
    // The attention output joins the residual, and the FFN's norm is taken,
    // in one pass over the tokens.
    each_token([&](int64_t t) {
      if (step.out_bias) add_inplace(&s.proj[size_t(t * c.n_embd)], w.bo.data(), c.n_embd);
      lead_.add_residual(step.post_norms ? &w.attn_post_norm : nullptr, t, isa);
      // Feed-forward block.
      lead_.norm_row(&s.x[size_t(t * c.n_embd)], w.ffn_norm, w.ffn_norm_b, &s.xn[size_t(t * c.n_embd)], isa);
    });
    feed_forward(w, step);
    // The file truncated under the call: this layer read zeros, stop here.
    lead_.model_->check_weights_intact();
    for (const ForwardRequest& part : parts_)
      if (part.session->mapped_) part.session->mapped_->check_intact();
  }

  // The output norm and head for the rows whose logits are asked for.
  void logits() {
    const int64_t out_rows = gather_logits_rows();
    if (out_rows == 0) return;
    pool_.run(size_t(out_rows), [&](size_t k) {
      lead_.norm_row(&s.x[size_t(s.logits_rows[k] * c.n_embd)], lead_.model_->output_norm(),
                     lead_.model_->output_norm_bias(), &s.xn[k * size_t(c.n_embd)], isa);
    });
    // A part alone receives its logits in place; a batch's are split after.
    const bool alone = parts_.size() == 1;
    std::vector<float>& out = alone ? *parts_[0].logits : s.logits;
    out.resize(size_t(out_rows * c.n_vocab));
    weight_product(lead_.model_->output(), s.xn.data(), c.n_embd, out_rows, out.data(), c.n_vocab);
    if (plan.final_softcap > 0.0f) softcap_inplace(out.data(), plan.final_softcap, out_rows * c.n_vocab);
    lead_.model_->check_weights_intact();
    if (!alone) split_logits(out);
  }

 private:
  // The lead's pool, or none (inline) for a pass too small to gain from it.
  static ThreadPool& pool_for(Session& lead, std::span<const ForwardRequest> parts) {
    static ThreadPool inline_pool(1);  // no workers: its run() only loops, on any thread
    if (!lead.options_.small_passes_inline || lead.pool_->size() == 1) return *lead.pool_;
    const bool threaded = pass_pays_for_threads(lead.model_->weight_bytes(), pass_macs(*lead.model_, parts));
    return threaded ? *lead.pool_ : inline_pool;
  }

  // Rows in order of the parts; each row's session, position and token.
  // Returns the number of rows.
  static int64_t gather_rows(std::span<const ForwardRequest> parts, Scratch& s) {
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
    return int64_t(s.row_token.size());
  }

  // The attention block up to its output projection (in proj); K and V
  // also land in each row's cache.
  void attention(int l, const LayerWeights& w, const LayerPlan& step) {
    each_token([&](int64_t t) {
      lead_.norm_row(&s.x[size_t(t * c.n_embd)], w.attn_norm, w.attn_norm_b, &s.xn[size_t(t * c.n_embd)], isa);
    });
    weight_products_of_xn(std::array<Q8Product, 3>{
        {{&w.wq, s.q.data(), q_width}, {&w.wk, s.k.data(), kv_width}, {&w.wv, s.v.data(), kv_width}}});
    each_token([&](int64_t t) { finish_qkv(l, w, step, t); });
    lay_out_part_kv(l);
    const AttentionExtras extras{step.window, step.attn_softcap};
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
  }

  // Token t's q, k and v after their products: biases, q/k norms, rotation;
  // then k and v are stored in its cache.
  void finish_qkv(int l, const LayerWeights& w, const LayerPlan& step, int64_t t) {
    const float* cos = step.local_rope ? s.cos_local.data() : s.cos.data();
    const float* sin = step.local_rope ? s.sin_local.data() : s.sin.data();
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
    KvCache& cache = parts_[size_t(s.row_part[size_t(t)])].session->cache_;
    float* k_row = cache.k(l, s.row_position[size_t(t)]);
    float* v_row = cache.v(l, s.row_position[size_t(t)]);
    std::copy_n(k, kv_width, k_row);
    std::copy_n(v, kv_width, v_row);
    round_kv_rows(kv_rounding, k_row, c.n_head_kv, c.head_dim);
    round_kv_rows(kv_rounding, v_row, c.n_head_kv, c.head_dim);
  }

  // Each part's KV in layer l: its cache from the first position it holds,
  // and the mapped segments before that.
  void lay_out_part_kv(int l) {
    s.part_kv.clear();
    for (const ForwardRequest& part : parts_) {
      KvCache& cache = part.session->cache_;
      const MappedKv* mapped = part.session->mapped_.get();
      const int64_t held = cache.first_position();  // positions before it are mapped
      s.part_kv.push_back(KvLayout{cache.k(l, held), cache.v(l, held), kv_width, 0,
                                   mapped ? mapped->layer(l) : std::span<const KvSegment>()});
    }
  }

  // From the normed rows in xn to the FFN's output added to the residual.
  void feed_forward(const LayerWeights& w, const LayerPlan& step) {
    if (step.ffn == FfnKind::GeluBiased) {
      weight_product(w.w_up, s.xn.data(), c.n_embd, n, s.gate.data(), c.n_ff);
      each_token([&](int64_t t) {
        float* g = &s.gate[size_t(t * c.n_ff)];
        add_inplace(g, w.b_up.data(), c.n_ff);
        gelu_inplace(g, c.n_ff);
      });
    } else {
      weight_products_of_xn(
          std::array<Q8Product, 2>{{{&w.w_gate, s.gate.data(), c.n_ff}, {&w.w_up, s.up.data(), c.n_ff}}});
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
      lead_.add_residual(step.post_norms ? &w.ffn_post_norm : nullptr, t, isa);
    });
  }

  // The rows whose logits are asked for, in order of the parts (they are
  // normed into xn's first rows; one product with the output matrix for
  // them all). Returns their number.
  int64_t gather_logits_rows() {
    s.logits_rows.clear();
    int64_t row = 0;
    for (const ForwardRequest& part : parts_) {
      const int64_t rows = int64_t(part.tokens.size());
      if (part.logits && part.which != LogitsFor::None)
        for (int64_t t = part.which == LogitsFor::All ? row : row + rows - 1; t < row + rows; ++t) s.logits_rows.push_back(t);
      row += rows;
    }
    return int64_t(s.logits_rows.size());
  }

  // A batch's logits, each part's rows to its own vector.
  void split_logits(const std::vector<float>& out) const {
    int64_t taken = 0;
    for (const ForwardRequest& part : parts_) {
      if (!part.logits || part.which == LogitsFor::None) continue;
      const int64_t rows = part.which == LogitsFor::All ? int64_t(part.tokens.size()) : 1;
      part.logits->assign(out.begin() + taken * c.n_vocab, out.begin() + (taken + rows) * c.n_vocab);
      taken += rows;
    }
  }

  // Every product with a weight matrix goes through here, so the recipe's
  // arithmetic is chosen in one place: q8-portable-v1 quantizes activations
  // against block-quantized matrices (matmul_q8 itself computes F32/F16/BF16
  // matrices as matmul does).
  void weight_product(const WeightMatrix& m, const float* in, int64_t in_stride, int64_t tokens, float* out,
                      int64_t out_stride) {
    if (q8)
      matmul_q8(m, in, in_stride, tokens, out, out_stride, pool_, isa);
    else
      matmul(m, in, in_stride, tokens, out, out_stride, pool_, isa);
  }

  // Products of several matrices with the normed rows (q, k and v; gate and
  // up): under q8 the rows are quantized once for all of them
  // (matmul_q8_same_input: the same bits as one product at a time).
  template <size_t N>
  void weight_products_of_xn(const std::array<Q8Product, N>& products) {
    if (q8) return matmul_q8_same_input(products, s.xn.data(), c.n_embd, n, pool_, isa);
    for (const Q8Product& p : products) weight_product(*p.w, s.xn.data(), c.n_embd, n, p.y, p.y_stride);
  }

  // Row-wise steps run token by token, spread over the pool in groups: a
  // token's row is its own, so the grouping changes no bit. A decode step's
  // one token runs inline.
  template <class Step>
  void each_token(const Step& step) {
    pool_.run(size_t((n + tokens_per_task - 1) / tokens_per_task), [&](size_t task) {
      const int64_t begin = int64_t(task) * tokens_per_task;
      for (int64_t t = begin; t < std::min(n, begin + tokens_per_task); ++t) step(t);
    });
  }

  Session& lead_;
  const std::span<const ForwardRequest> parts_;
  ThreadPool& pool_;  // every parallel region of this pass
  const ModelConfig& c;  // the shapes; what is computed is the plan's
  const ForwardPlan& plan;
  const Isa isa;
  Scratch& s;
  const int64_t n;  // rows
  const int64_t q_width = int64_t(c.n_head) * c.head_dim;
  const int64_t kv_width = c.kv_row_floats();
  const int group = c.n_head / c.n_head_kv;
  const int pairs = c.rope_dim / 2;
  const bool q8 = lead_.options_.recipe.arithmetic == Arithmetic::Q8;
  const int64_t tokens_per_task = std::max<int64_t>(8, (n + 4 * pool_.size() - 1) / (4 * pool_.size()));
  const KvRowRounding kv_rounding = kv_rounding_of(lead_.options_.recipe.kv);
};

// This session (the lead) runs the pass with its pool and buffers; every
// part's rows go through each matrix product together, and each row is
// attended over its own session's cache at its own position. Every step is
// row-independent, so a part's bits are those of its session alone.
void Session::forward_cpu(std::span<const ForwardRequest> parts) {
  if (!scratch_) scratch_.reset(ScratchRelease::spare() ? ScratchRelease::spare().release() : new Scratch());
  Scratch::Pass pass(*this, parts);
  pass.embed();
  for (int l = 0; l < model_->config().n_layer; ++l) pass.layer(l);
  pass.logits();
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
