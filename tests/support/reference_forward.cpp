#include "kernels/cpu/dequantize.hpp"
#include "tests/support/reference_forward.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace kvg::test {

namespace {

using Matrix = std::vector<std::vector<double>>;  // [row][col]

Matrix to_double(const WeightMatrix& w) {
  Matrix m(size_t(w.rows), std::vector<double>(size_t(w.cols)));
  std::vector<float> row(size_t(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w, r, row.data());
    for (int64_t c = 0; c < w.cols; ++c) m[size_t(r)][size_t(c)] = row[size_t(c)];
  }
  return m;
}

std::vector<double> matvec(const Matrix& m, const std::vector<double>& x) {
  std::vector<double> y(m.size(), 0.0);
  for (size_t r = 0; r < m.size(); ++r)
    for (size_t c = 0; c < x.size(); ++c) y[r] += m[r][c] * x[c];
  return y;
}

std::vector<double> rms_norm(const std::vector<double>& x, const std::vector<float>& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / double(x.size()) + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * double(w[i]);
  return y;
}

// The rotary frequencies of one layer: base^(-2i/d), times the linear scale,
// divided by Llama 3.1's per-pair factors; gemma3's sliding layers use base
// 10000 and no scaling.
struct RopeParams {
  double base, scale;
  const std::vector<float>* factors;
};

void rope(std::vector<double>& v, int n_heads, int head_dim, int rope_dim, const RopeParams& r, int64_t pos,
          RopeStyle style) {
  for (int h = 0; h < n_heads; ++h)
    for (int i = 0; i < rope_dim / 2; ++i) {
      double freq = std::pow(r.base, -2.0 * i / rope_dim) * r.scale;
      if (r.factors && !r.factors->empty()) freq /= double((*r.factors)[size_t(i)]);
      const double angle = double(pos) * freq;
      const bool pairs = style == RopeStyle::AdjacentPairs;
      double& a = v[size_t(h * head_dim + (pairs ? 2 * i : i))];
      double& b = v[size_t(h * head_dim + (pairs ? 2 * i + 1 : i + rope_dim / 2))];
      const double a0 = a, b0 = b;
      a = a0 * std::cos(angle) - b0 * std::sin(angle);
      b = a0 * std::sin(angle) + b0 * std::cos(angle);
    }
}

// Each head of `v` normalised on its own (qwen3 / gemma3 q/k norm).
void head_norms(std::vector<double>& v, int n_heads, int head_dim, const std::vector<float>& w, double eps) {
  for (int h = 0; h < n_heads; ++h) {
    std::vector<double> head(v.begin() + h * head_dim, v.begin() + (h + 1) * head_dim);
    head = rms_norm(head, w, eps);
    std::copy(head.begin(), head.end(), v.begin() + h * head_dim);
  }
}

// LayerNorm with its bias (starcoder2).
std::vector<double> layer_norm(const std::vector<double>& x, const std::vector<float>& w, const std::vector<float>& b,
                               double eps) {
  double mean = 0, var = 0;
  for (double v : x) mean += v;
  mean /= double(x.size());
  for (double v : x) var += (v - mean) * (v - mean);
  const double inv = 1.0 / std::sqrt(var / double(x.size()) + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mean) * inv * double(w[i]) + double(b[i]);
  return y;
}

void add(std::vector<double>& x, const std::vector<float>& b) {
  for (size_t i = 0; i < b.size(); ++i) x[i] += double(b[i]);
}

double gelu_tanh(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
double silu(double x) { return x / (1.0 + std::exp(-x)); }
double softcap(double x, double cap) { return cap * std::tanh(x / cap); }

// Which layers use the sliding window, per architecture (as documented by
// each family, written out here independently of the engine's table).
bool slides(const std::string& arch, int layer) {
  if (arch == "gemma2") return layer % 2 == 0;
  if (arch == "gemma3") return layer % 6 < 5;
  return arch == "phi3";
}

// 1/sqrt(query_pre_attn_scalar): gemma2/3's largest models use n_embd / n_head.
double query_scale(const ModelConfig& c) {
  const bool largest = (c.architecture == "gemma2" && c.n_layer == 46) || (c.architecture == "gemma3" && c.n_layer == 62);
  return 1.0 / std::sqrt(double(largest ? c.n_embd / c.n_head : c.head_dim));
}

}  // namespace

std::vector<double> reference_logits(const Model& model, const std::vector<int32_t>& tokens) {
  const ModelConfig& c = model.config();
  const Matrix embd = to_double(model.token_embedding());
  const Matrix out = to_double(model.output());
  struct Layer { Matrix q, k, v, o, gate, up, down; };
  std::vector<Layer> layers;
  for (const auto& w : model.layers())
    layers.push_back({to_double(w.wq), to_double(w.wk), to_double(w.wv), to_double(w.wo), to_double(w.w_gate),
                      to_double(w.w_up), to_double(w.w_down)});
  std::vector<std::vector<std::vector<double>>> keys(size_t(c.n_layer)), values(size_t(c.n_layer));
  std::vector<double> logits;
  const int group = c.n_head / c.n_head_kv;
  const bool gemma = c.architecture.rfind("gemma", 0) == 0;
  const bool starcoder2 = c.architecture == "starcoder2";  // LayerNorm, biases, ungated GELU FFN
  auto block_norm = [&](const std::vector<double>& x, const std::vector<float>& w, const std::vector<float>& b) {
    return starcoder2 ? layer_norm(x, w, b, c.norm_eps) : rms_norm(x, w, c.norm_eps);
  };
  const double attn_cap = c.attn_softcap, final_cap = c.final_softcap;
  for (size_t t = 0; t < tokens.size(); ++t) {
    std::vector<double> x = embd[size_t(tokens[t])];
    if (gemma)
      for (double& e : x) e *= std::sqrt(double(c.n_embd));
    for (int l = 0; l < c.n_layer; ++l) {
      const LayerWeights& w = model.layers()[size_t(l)];
      const Layer& d = layers[size_t(l)];
      const bool sliding = c.sliding_window > 0 && slides(c.architecture, l);
      const RopeParams r = sliding && c.architecture == "gemma3" ? RopeParams{10000.0, 1.0, nullptr}
                                                                 : RopeParams{c.rope_base, c.rope_freq_scale, &c.rope_freq_factors};
      const size_t first_key = sliding && int64_t(t) >= c.sliding_window ? t - size_t(c.sliding_window) + 1 : 0;
      auto xn = block_norm(x, w.attn_norm, w.attn_norm_b);
      std::vector<double> q = matvec(d.q, xn);
      std::vector<double> k = matvec(d.k, xn);
      std::vector<double> v = matvec(d.v, xn);
      if (c.qkv_bias)
        for (size_t i = 0; i < q.size(); ++i) q[i] += w.bq[i];
      if (c.qkv_bias)
        for (size_t i = 0; i < k.size(); ++i) k[i] += w.bk[i], v[i] += w.bv[i];
      if (!w.q_norm.empty()) head_norms(q, c.n_head, c.head_dim, w.q_norm, c.norm_eps);
      if (!w.k_norm.empty()) head_norms(k, c.n_head_kv, c.head_dim, w.k_norm, c.norm_eps);
      rope(q, c.n_head, c.head_dim, c.rope_dim, r, int64_t(t), c.rope_style);
      rope(k, c.n_head_kv, c.head_dim, c.rope_dim, r, int64_t(t), c.rope_style);
      keys[size_t(l)].push_back(k);
      values[size_t(l)].push_back(v);
      std::vector<double> attn(size_t(c.n_head * c.head_dim), 0.0);
      for (int h = 0; h < c.n_head; ++h) {
        const size_t kv_off = size_t((h / group) * c.head_dim), q_off = size_t(h * c.head_dim);
        std::vector<double> scores(t + 1, 0.0);
        double max_score = -INFINITY;
        for (size_t j = first_key; j <= t; ++j) {
          double s = 0;
          for (int e = 0; e < c.head_dim; ++e) s += q[q_off + size_t(e)] * keys[size_t(l)][j][kv_off + size_t(e)];
          scores[j] = s * query_scale(c);
          if (attn_cap > 0) scores[j] = softcap(scores[j], attn_cap);
          max_score = std::max(max_score, scores[j]);
        }
        double total = 0;
        for (size_t j = first_key; j <= t; ++j) total += (scores[j] = std::exp(scores[j] - max_score));
        for (size_t j = first_key; j <= t; ++j)
          for (int e = 0; e < c.head_dim; ++e)
            attn[q_off + size_t(e)] += scores[j] / total * values[size_t(l)][j][kv_off + size_t(e)];
      }
      auto o = matvec(d.o, attn);
      add(o, w.bo);
      if (!w.attn_post_norm.empty()) o = rms_norm(o, w.attn_post_norm, c.norm_eps);
      for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      xn = block_norm(x, w.ffn_norm, w.ffn_norm_b);
      std::vector<double> u = matvec(d.up, xn), g;
      if (starcoder2) {
        add(u, w.b_up);
        for (double v : u) g.push_back(gelu_tanh(v));
      } else {
        g = matvec(d.gate, xn);
        for (size_t i = 0; i < g.size(); ++i) g[i] = (gemma ? gelu_tanh(g[i]) : silu(g[i])) * u[i];
      }
      auto down = matvec(d.down, g);
      add(down, w.b_down);
      if (!w.ffn_post_norm.empty()) down = rms_norm(down, w.ffn_post_norm, c.norm_eps);
      for (size_t i = 0; i < x.size(); ++i) x[i] += down[i];
    }
    auto row = matvec(out, block_norm(x, model.output_norm(), model.output_norm_bias()));
    if (final_cap > 0)
      for (double& v : row) v = softcap(v, final_cap);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  return logits;
}

}  // namespace kvg::test
