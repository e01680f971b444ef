// The transformer forward pass of every supported family (engine/architectures.hpp)
// under the session's recipe (engine/recipe.hpp, docs/recipe.md). Every step is row-independent: a token's values depend only on its
// own inputs and the KV rows before it, so batching, chunking and threading
// cannot change a bit (docs/design.md, recipe rule 1).
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

Session::Session(std::shared_ptr<const Model> model, EngineOptions options)
    : model_(std::move(model)),
      options_(options),
      pool_(std::max(1, options.threads)),
      rope_(rope_table_for(model_->config(), false)),
      rope_local_(rope_table_for(model_->config(), true)),
      cache_(model_->config().n_layer, model_->config().kv_row_floats(),
             options.max_context > 0 ? std::min<int64_t>(options.max_context, model_->config().n_ctx)
                                     : model_->config().n_ctx,
             options.max_kv_bytes, options.kv_limit_name),
      scratch_(std::make_shared<Scratch>()) {
  const DeviceChoice choice = resolve_device(options_.device);
  if (!choice.runs_on) throw Error(ErrorCode::Unsupported, "no usable CUDA device: " + choice.detail);
  if (*choice.runs_on != Device::Cuda) return;
  // The GPU mirror is allocated for the whole context at once.
  if (options_.max_kv_bytes > 0 && cache_.bytes_for(cache_.max_positions()) > options_.max_kv_bytes)
    throw Error(ErrorCode::OutOfRange, "a context of " + std::to_string(cache_.max_positions()) + " positions needs " +
                                           std::to_string(cache_.bytes_for(cache_.max_positions())) +
                                           " bytes of KV cache on the GPU, above " + options_.kv_limit_name + " = " +
                                           std::to_string(options_.max_kv_bytes) + " bytes");
  if (options_.device != Device::Auto) {
    cuda_ = std::make_shared<CudaForward>(model_, cache_.max_positions(), options_.recipe,
                                          options_.gpu_staging_bytes);
    return;
  }
  // Auto promised the CPU's bits on whichever device works: a GPU that cannot
  // be set up (out of memory with other backends on it, a failed stream)
  // costs speed, not the call.
  try {
    cuda_ = std::make_shared<CudaForward>(model_, cache_.max_positions(), options_.recipe,
                                          options_.gpu_staging_bytes);
  } catch (const std::exception& e) {
    fallback_ = std::string("the GPU could not be set up for this session, running on the CPU: ") + e.what();
    note_device_fallback(fallback_);
  }
}

void Session::check_tokens(std::span<const int32_t> tokens) const {
  const int n_vocab = model_->config().n_vocab;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= n_vocab)
      throw Error(ErrorCode::InvalidArgument, "token id " + std::to_string(tokens[i]) + " at index " +
                                                  std::to_string(i) + " is outside the vocabulary [0, " +
                                                  std::to_string(n_vocab) + ")");
  if (n_past() + int64_t(tokens.size()) > cache_.max_positions())
    throw Error(ErrorCode::OutOfRange, "prompt of " + std::to_string(n_past() + int64_t(tokens.size())) +
                                           " tokens exceeds the context length " +
                                           std::to_string(cache_.max_positions()));
}

void Session::forward(std::span<const int32_t> tokens, LogitsFor which, std::vector<float>* logits) {
  check_tokens(tokens);
  const int64_t n = int64_t(tokens.size());
  if (n == 0) {
    if (logits) logits->clear();
    return;
  }
  if (cuda_) {
    try {
      cuda_->forward(tokens, n_past(), which, logits, cache_);
      model_->check_weights_intact();
      tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
      return;
    } catch (const Error& e) {
      // The KV mirror and scratch are allocated as the context grows, so under
      // Auto running out of device memory here is still a set-up failure: the
      // host cache is authoritative (CudaForward wrote nothing into it), so the
      // CPU takes over from the same position with the same bits. Any other
      // error fails the call (and a sticky one retires the device).
      if (options_.device != Device::Auto || e.code() != ErrorCode::OutOfRange) throw;
      fallback_ = std::string("the GPU ran out of memory, running on the CPU: ") + e.what();
      note_device_fallback(fallback_);
      cuda_.reset();
    }
  }
  const ModelConfig& c = model_->config();
  const Isa isa = options_.isa;
  const int64_t p0 = n_past();
  const int64_t q_width = int64_t(c.n_head) * c.head_dim;
  const int64_t kv_width = c.kv_row_floats();
  const int group = c.n_head / c.n_head_kv;
  cache_.reserve(p0 + n);
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
  if (c.embed_scale) scale_inplace(s.x.data(), std::sqrt(float(c.n_embd)), n * c.n_embd);

  for (int l = 0; l < c.n_layer; ++l) {
    const LayerWeights& w = model_->layers()[size_t(l)];
    const RopeTable& rope = c.layer_slides(l) ? rope_local_ : rope_;
    const AttentionExtras extras{c.window(l), c.attn_softcap};
    // Attention block.
    for (int64_t t = 0; t < n; ++t) norm_row(&s.x[size_t(t * c.n_embd)], w.attn_norm, w.attn_norm_b, &s.xn[size_t(t * c.n_embd)], isa);
    weight_product(w.wq, s.xn.data(), c.n_embd, n, s.q.data(), q_width);
    weight_product(w.wk, s.xn.data(), c.n_embd, n, s.k.data(), kv_width);
    weight_product(w.wv, s.xn.data(), c.n_embd, n, s.v.data(), kv_width);
    if (c.qkv_bias)
      for (int64_t t = 0; t < n; ++t) {
        add_inplace(&s.q[size_t(t * q_width)], w.bq.data(), q_width);
        add_inplace(&s.k[size_t(t * kv_width)], w.bk.data(), kv_width);
        add_inplace(&s.v[size_t(t * kv_width)], w.bv.data(), kv_width);
      }
    if (c.qk_norm)  // each head's q and k normalised on their own, before rotation
      for (int64_t t = 0; t < n; ++t) {
        for (int h = 0; h < c.n_head; ++h) {
          float* qh = &s.q[size_t(t * q_width + int64_t(h) * c.head_dim)];
          rmsnorm(qh, w.q_norm.data(), c.head_dim, c.norm_eps, qh, isa);
        }
        for (int h = 0; h < c.n_head_kv; ++h) {
          float* kh = &s.k[size_t(t * kv_width + int64_t(h) * c.head_dim)];
          rmsnorm(kh, w.k_norm.data(), c.head_dim, c.norm_eps, kh, isa);
        }
      }
    for (int64_t t = 0; t < n; ++t) {
      rope.angles(p0 + t, s.cos.data(), s.sin.data());
      apply_rope(&s.q[size_t(t * q_width)], c.n_head, c.head_dim, c.rope_dim, s.cos.data(), s.sin.data(), c.rope_style);
      apply_rope(&s.k[size_t(t * kv_width)], c.n_head_kv, c.head_dim, c.rope_dim, s.cos.data(), s.sin.data(), c.rope_style);
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
      attention_head(&s.q[size_t(t * q_width + int64_t(h) * c.head_dim)], head_kv, c.head_dim, p0 + t, c.attn_scale,
                     &s.attn[size_t(t * q_width + int64_t(h) * c.head_dim)], isa, extras);
    });
    weight_product(w.wo, s.attn.data(), q_width, n, s.proj.data(), c.n_embd);
    add_bias(s.proj.data(), w.bo, n);
    add_residual(w.attn_post_norm, n, isa);

    // Feed-forward block (SwiGLU, or GeGLU for the gemma family).
    for (int64_t t = 0; t < n; ++t) norm_row(&s.x[size_t(t * c.n_embd)], w.ffn_norm, w.ffn_norm_b, &s.xn[size_t(t * c.n_embd)], isa);
    if (c.gated_ffn) {
      weight_product(w.w_gate, s.xn.data(), c.n_embd, n, s.gate.data(), c.n_ff);
      weight_product(w.w_up, s.xn.data(), c.n_embd, n, s.up.data(), c.n_ff);
      // Element-wise, so each token's row can go to any thread.
      pool_.run(size_t(n), [&](size_t task) {
        const int64_t t = int64_t(task);
        float* g = &s.gate[size_t(t * c.n_ff)];
        if (c.ffn_activation == FfnActivation::GeluTanh)
          geglu(g, &s.up[size_t(t * c.n_ff)], g, c.n_ff);
        else
          swiglu(g, &s.up[size_t(t * c.n_ff)], g, c.n_ff, isa);
      });
    } else {  // starcoder2: gelu(up x + b)
      weight_product(w.w_up, s.xn.data(), c.n_embd, n, s.gate.data(), c.n_ff);
      add_bias(s.gate.data(), w.b_up, n);
      gelu_inplace(s.gate.data(), n * c.n_ff);
    }
    weight_product(w.w_down, s.gate.data(), c.n_ff, n, s.proj.data(), c.n_embd);
    add_bias(s.proj.data(), w.b_down, n);
    add_residual(w.ffn_post_norm, n, isa);
    // The file truncated under the call: this layer read zeros, stop here.
    model_->check_weights_intact();
    if (mapped_) mapped_->check_intact();
  }
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());

  if (which == LogitsFor::None || !logits) return;
  const int64_t first = which == LogitsFor::All ? 0 : n - 1;
  const int64_t rows = n - first;
  for (int64_t t = first; t < n; ++t)
    norm_row(&s.x[size_t(t * c.n_embd)], model_->output_norm(), model_->output_norm_bias(),
             &s.xn[size_t((t - first) * c.n_embd)], isa);
  logits->resize(size_t(rows * c.n_vocab));
  weight_product(model_->output(), s.xn.data(), c.n_embd, rows, logits->data(), c.n_vocab);
  if (c.final_softcap > 0.0f) softcap_inplace(logits->data(), c.final_softcap, rows * c.n_vocab);
  model_->check_weights_intact();
}

// The block and output norms: RMSNorm, or LayerNorm with its bias (starcoder2).
void Session::norm_row(const float* x, const std::vector<float>& w, const std::vector<float>& b, float* y, Isa isa) const {
  const ModelConfig& c = model_->config();
  if (c.layer_norm)
    layernorm(x, w.data(), b.data(), c.n_embd, c.norm_eps, y, isa);
  else
    rmsnorm(x, w.data(), c.n_embd, c.norm_eps, y, isa);
}

// rows[t * bias.size() + i] += bias[i] for n rows (nothing for an empty bias).
void Session::add_bias(float* rows, const std::vector<float>& bias, int64_t n) const {
  if (bias.empty()) return;
  const int64_t width = int64_t(bias.size());
  for (int64_t t = 0; t < n; ++t) add_inplace(rows + t * width, bias.data(), width);
}

// x += proj for n tokens; with a post-norm (gemma2/3) x += rmsnorm(proj)
// instead, the norm written to xn first (free between the blocks).
void Session::add_residual(const std::vector<float>& post_norm, int64_t n, Isa isa) {
  const ModelConfig& c = model_->config();
  Scratch& s = *scratch_;
  for (int64_t t = 0; t < n; ++t) {
    const float* delta = &s.proj[size_t(t * c.n_embd)];
    if (!post_norm.empty()) {
      rmsnorm(delta, post_norm.data(), c.n_embd, c.norm_eps, &s.xn[size_t(t * c.n_embd)], isa);
      delta = &s.xn[size_t(t * c.n_embd)];
    }
    add_inplace(&s.x[size_t(t * c.n_embd)], delta, c.n_embd);
  }
}

void Session::prefill(std::span<const int32_t> tokens, int64_t chunk, LogitsFor which, std::vector<float>* logits,
                      const ProgressCheck& check, const ProgressReport& report) {
  check_tokens(tokens);
  const int64_t n = int64_t(tokens.size());
  if (chunk <= 0) chunk = std::max<int64_t>(n, 1);
  if (logits) logits->clear();
  std::vector<float> part;
  if (report) report(0, n);
  for (int64_t start = 0; start < n; start += chunk) {
    if (check) check();
    const int64_t end = std::min(n, start + chunk);
    const bool last_chunk = end == n;
    const LogitsFor part_which = which == LogitsFor::All ? LogitsFor::All
                                 : (which == LogitsFor::Last && last_chunk) ? LogitsFor::Last
                                                                            : LogitsFor::None;
    forward(tokens.subspan(size_t(start), size_t(end - start)), part_which, logits ? &part : nullptr);
    if (logits && part_which != LogitsFor::None) logits->insert(logits->end(), part.begin(), part.end());
    if (report) report(end, n);
  }
}

void Session::truncate(int64_t n) {
  if (n < 0 || n > n_past()) throw Error(ErrorCode::InvalidArgument, "truncate to " + std::to_string(n) + " is outside [0, n_past]");
  if (n < mapped_end())
    throw Error(ErrorCode::InvalidArgument, "truncate to " + std::to_string(n) + ": positions below " +
                                                std::to_string(mapped_end()) + " are mapped from artifacts");
  tokens_.resize(size_t(n));
  if (cuda_) cuda_->truncate(n);
}

void Session::append_grafted(std::span<const int32_t> tokens) {
  check_tokens(tokens);
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
}

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
