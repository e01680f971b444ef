// The CUDA executor: the model's plan (engine/layer_plan.hpp), the same steps
// in the same order as the CPU executor (engine/forward.cpp), each a kernel
// from kernels/cuda that reproduces its CPU counterpart bit for bit. Only the data movement differs: K and V are
// written straight into a device mirror of the KV cache, laid out position-
// major ([position][layer][K | V][kv_width]) so that the rows of one forward
// travel to and from the host in a single copy.
#include "engine/cuda_forward.hpp"
#include "engine/kv_storage.hpp"

#include "common/error.hpp"

#ifdef KVG_HAVE_CUDA

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "kernels/cpu/rope_table.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/cuda_runtime_probe.hpp"
#include "kernels/cuda/device_matrix.hpp"
#include "kernels/cuda/device_memory.hpp"
#include "kernels/cuda/kv_rounding.hpp"
#include "kernels/cuda/matmul.hpp"
#include "kernels/cuda/matmul_q8.hpp"
#include "kernels/cuda/ops.hpp"

namespace kvg {

// Every step of a plan runs here, and these name each entry run: a new
// entry of LayerPlan or ForwardPlan stops the build until it runs here too
// and is named here (engine/layer_plan.hpp, runs_every_entry).
static_assert(runs_every_entry<LayerPlan, &LayerPlan::qkv_bias, &LayerPlan::qk_norm, &LayerPlan::local_rope,
                               &LayerPlan::window, &LayerPlan::attn_softcap, &LayerPlan::out_bias,
                               &LayerPlan::post_norms, &LayerPlan::ffn>,
              "a new LayerPlan entry (engine/layer_plan.hpp): run it in the CUDA executor, then name it here");
static_assert(runs_every_entry<ForwardPlan, &ForwardPlan::embed_scale, &ForwardPlan::norm, &ForwardPlan::norm_eps,
                               &ForwardPlan::rope_style, &ForwardPlan::rope, &ForwardPlan::rope_local,
                               &ForwardPlan::attn_scale, &ForwardPlan::layers, &ForwardPlan::final_softcap>,
              "a new ForwardPlan entry (engine/layer_plan.hpp): run it in the CUDA executor, then name it here");

namespace {

// A model's weights on the device. Matrices keep their storage format; a
// tied output head shares the embedding's bytes.
struct DeviceWeights {
  struct Layer {
    WeightMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
    const float* attn_norm = nullptr;
    const float* ffn_norm = nullptr;
    const float* bq = nullptr;  // q/k/v biases, when config().qkv_bias
    const float* bk = nullptr;
    const float* bv = nullptr;
    const float* q_norm = nullptr;  // when config().qk_norm
    const float* k_norm = nullptr;
    const float* attn_post_norm = nullptr;  // when config().post_norms
    const float* ffn_post_norm = nullptr;
    const float* attn_norm_b = nullptr;  // LayerNorm biases and the output and FFN biases (NormKind::LayerWithBias)
    const float* ffn_norm_b = nullptr;
    const float* bo = nullptr;
    const float* b_up = nullptr;
    const float* b_down = nullptr;
  };
  WeightMatrix token_embedding, output;
  const float* output_norm = nullptr;
  const float* output_norm_b = nullptr;
  std::vector<Layer> layers;

  explicit DeviceWeights(const Model& model) {
    cuda::Stream stream;
    std::map<const uint8_t*, WeightMatrix> uploaded;  // host bytes -> device view
    auto matrix = [&](const WeightMatrix& w) {
      if (!w.data) return WeightMatrix{};  // a matrix the model does not have (starcoder2's FFN gate)
      auto it = uploaded.find(w.data);
      if (it != uploaded.end()) return it->second;
      matrices_.push_back(cuda::upload_matrix(w, stream));
      return uploaded[w.data] = matrices_.back().view;
    };
    auto floats = [&](const std::vector<float>& v) -> const float* {
      if (v.empty()) return nullptr;
      vectors_.push_back(cuda::upload_floats(v, stream));
      return vectors_.back().as<const float>();
    };
    token_embedding = matrix(model.token_embedding());
    output = matrix(model.output());
    output_norm = floats(model.output_norm());
    output_norm_b = floats(model.output_norm_bias());
    for (const LayerWeights& l : model.layers())
      layers.push_back(Layer{.wq = matrix(l.wq),
                             .wk = matrix(l.wk),
                             .wv = matrix(l.wv),
                             .wo = matrix(l.wo),
                             .w_gate = matrix(l.w_gate),
                             .w_up = matrix(l.w_up),
                             .w_down = matrix(l.w_down),
                             .attn_norm = floats(l.attn_norm),
                             .ffn_norm = floats(l.ffn_norm),
                             .bq = floats(l.bq),
                             .bk = floats(l.bk),
                             .bv = floats(l.bv),
                             .q_norm = floats(l.q_norm),
                             .k_norm = floats(l.k_norm),
                             .attn_post_norm = floats(l.attn_post_norm),
                             .ffn_post_norm = floats(l.ffn_post_norm),
                             .attn_norm_b = floats(l.attn_norm_b),
                             .ffn_norm_b = floats(l.ffn_norm_b),
                             .bo = floats(l.bo),
                             .b_up = floats(l.b_up),
                             .b_down = floats(l.b_down)});
    stream.synchronize();  // complete before any other stream reads them
  }

 private:
  std::vector<cuda::DeviceMatrix> matrices_;
  std::vector<cuda::DeviceBuffer> vectors_;
};

// Everything a CudaForward uses on the device besides the weights: its
// stream, the KV mirror, the rotary tables, activations and pinned staging.
// A backend runs one call at a time and the extension builds a Session per
// call, so a finished CudaForward hands its workspace to the next one of the
// same model instead of freeing and re-allocating it all (and the rotary
// tables, which depend on the model only, stay uploaded).
// A rotary table on the device: rows [0, filled) of RopeTable angles.
struct DeviceRope {
  cuda::DeviceBuffer cos, sin;
  int64_t capacity = 0, filled = 0;
};

struct Workspace {
  cuda::Stream stream;
  cuda::DeviceBuffer kv;
  int64_t kv_capacity = 0;
  DeviceRope rope, rope_local;  // the plan's global and sliding-layer tables
  cuda::DeviceBuffer tokens_d, x, xn, q, attn, proj, gate, up, logits_d;
  cuda::DeviceBuffer kv_new;  // a batched pass's new K and V rows, before they move into each mirror
  int64_t scratch_tokens = 0, logits_rows = 0;
  cuda::DeviceBuffer q8_activations;  // q8-portable-v1: the quantized input of each product
  cuda::PinnedBuffer kv_up, rope_up, tokens_up, down;
};

std::atomic<int64_t> weight_upload_count{0};
std::atomic<int64_t> batched_pass_count{0};

// What stage() made ready, applied by advance() once the pass is done.
struct Staged {
  int64_t rope_after = 0, local_after = 0;
};

// Where a part's rows are in a pass: its tokens from first_row, its logits
// rows (of its tokens from first_logit_token) from first_logits_row.
struct PassRow {
  int64_t first_row = 0, first_logit_token = 0, logits_rows = 0, first_logits_row = 0;
};

// What a process keeps on the device for one loaded model, for as long as the
// Model lives (Model::resident_state): the weights, uploaded once however many
// sessions use them, and one idle workspace. A new Model (another kvg.model,
// or the file changed) gets its own; the old one's device memory goes with
// the old Model.
struct Resident {
  DeviceWeights weights;
  std::mutex mutex;
  std::unique_ptr<Workspace> idle;

  explicit Resident(const Model& model) : weights(model) { ++weight_upload_count; }

  std::unique_ptr<Workspace> take() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (idle) return std::move(idle);
    }
    return std::make_unique<Workspace>();
  }
  // Keeps one workspace: a backend runs one call at a time. A second one
  // (two sessions alive at once) is freed.
  void give_back(std::unique_ptr<Workspace> w) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!idle) idle = std::move(w);
  }
};

std::shared_ptr<Resident> resident_for(const std::shared_ptr<const Model>& model) {
  return std::static_pointer_cast<Resident>(
      model->resident_state([&]() -> std::shared_ptr<void> { return std::make_shared<Resident>(*model); }));
}

// Device growth policy shared by the KV mirror and the rope table: like the
// host KvCache, geometric steps up to the limit.
int64_t grown_capacity(int64_t current, int64_t needed, int64_t limit) {
  return std::min(limit, std::max(needed, std::max<int64_t>(256, current * 2)));
}

}  // namespace

struct CudaForward::Impl {
  std::shared_ptr<const Model> model;
  const ModelConfig& c;  // the shapes; what is computed is the plan's
  const ForwardPlan& plan;
  int64_t max_positions;
  Recipe recipe;
  // q8-portable-v1: block-quantized matrices multiply int8 activations.
  bool q8 = recipe.arithmetic == Arithmetic::Q8;
  // Bound on each pinned staging buffer for KV and logits (one unit, a KV
  // position or a logits row, more if a unit alone is larger).
  size_t staging_bytes;
  KvRowRounding kv_rounding;
  std::shared_ptr<Resident> resident;
  const DeviceWeights* weights = &resident->weights;
  std::unique_ptr<Workspace> ws = resident->take();
  cuda::Stream& stream = ws->stream;
  std::string device;
  // Set when a forward failed: the workspace may hold half-written state (or
  // sit on a failed device), so it is freed rather than handed on.
  bool failed = false;

  const int64_t q_width = int64_t(c.n_head) * c.head_dim;
  const int64_t kv_width = c.kv_row_floats();
  const int64_t position_floats = int64_t(c.n_layer) * 2 * kv_width;  // one position's row in the mirror
  const int rope_pairs = plan.rope.dim / 2;

  // The device mirror of the KV cache: [0, valid) equals host_cache rows.
  // A reused workspace's rows belong to another session: valid starts at 0.
  cuda::DeviceBuffer& kv = ws->kv;
  int64_t& kv_capacity = ws->kv_capacity;
  int64_t valid = 0;
  const KvCache* mirrored = nullptr;  // the host cache `valid` refers to

  // Rotary tables computed on the host by RopeTable (part of the recipe) and
  // uploaded once per position; the local one only when a layer uses it.
  RopeTable rope = plan.rope.table();
  RopeTable rope_local = plan.rope_local.table();
  bool uses_local_rope = std::any_of(plan.layers.begin(), plan.layers.end(),
                                     [](const LayerPlan& l) { return l.local_rope; });

  // Activations for up to scratch_tokens tokens.
  cuda::DeviceBuffer &tokens_d = ws->tokens_d, &x = ws->x, &xn = ws->xn, &q = ws->q, &attn = ws->attn,
                     &proj = ws->proj, &gate = ws->gate, &up = ws->up, &logits_d = ws->logits_d,
                     &kv_new = ws->kv_new;
  int64_t &scratch_tokens = ws->scratch_tokens, &logits_rows = ws->logits_rows;

  // Page-locked staging, one per purpose, so no upload still in flight is
  // overwritten; each forward ends with a synchronisation.
  cuda::PinnedBuffer &kv_up = ws->kv_up, &rope_up = ws->rope_up, &tokens_up = ws->tokens_up, &down = ws->down;

  Impl(std::shared_ptr<const Model> m, int64_t limit, Recipe r, size_t staging)
      : model(std::move(m)), c(model->config()), plan(model->plan()), max_positions(limit), recipe(r),
        staging_bytes(std::max<size_t>(staging, 1)), kv_rounding(kv_rounding_of(r.kv)),
        resident(resident_for(model)),
        device(cuda::device_description()) {}

  ~Impl() {
    if (!failed) resident->give_back(std::move(ws));
  }

  float* k_rows(int layer) const { return kv.as<float>() + int64_t(2 * layer) * kv_width; }
  float* v_rows(int layer) const { return kv.as<float>() + int64_t(2 * layer + 1) * kv_width; }

  void ensure_kv(int64_t positions) {
    if (positions <= kv_capacity) return;
    const int64_t capacity = grown_capacity(kv_capacity, positions, max_positions);
    cuda::DeviceBuffer bigger(size_t(capacity * position_floats) * sizeof(float));
    cuda::copy_on_device(bigger.data(), kv.data(), size_t(valid * position_floats) * sizeof(float), stream);
    stream.synchronize();  // the old buffer is freed below
    kv = std::move(bigger);
    kv_capacity = capacity;
  }

  // Returns the rows filled once the stream has run (`filled` advances only
  // after the forward's final synchronisation).
  int64_t ensure_rope(DeviceRope& d, const RopeTable& table, int64_t positions) {
    if (positions > d.capacity) {
      const int64_t capacity = grown_capacity(d.capacity, positions, max_positions);
      const size_t bytes = size_t(capacity * rope_pairs) * sizeof(float);
      cuda::DeviceBuffer cos_d(bytes), sin_d(bytes);
      const size_t kept = size_t(d.filled * rope_pairs) * sizeof(float);
      cuda::copy_on_device(cos_d.data(), d.cos.data(), kept, stream);
      cuda::copy_on_device(sin_d.data(), d.sin.data(), kept, stream);
      stream.synchronize();
      d.cos = std::move(cos_d);
      d.sin = std::move(sin_d);
      d.capacity = capacity;
    }
    if (positions <= d.filled || rope_pairs == 0) return std::max(d.filled, positions);
    // Through rope_up in chunks of at most staging_bytes, like the KV rows.
    const int64_t count = positions - d.filled;
    const int64_t per = std::min(count, units_per_chunk(2 * rope_pairs));
    rope_up.fit(size_t(2 * per * rope_pairs) * sizeof(float));
    for (int64_t start = 0; start < count; start += per) {
      if (start > 0) stream.synchronize();  // the previous chunk's copies have read rope_up
      const int64_t k = std::min(per, count - start);
      float* cos_h = rope_up.as<float>();
      float* sin_h = cos_h + k * rope_pairs;
      for (int64_t i = 0; i < k; ++i)
        table.angles(d.filled + start + i, cos_h + i * rope_pairs, sin_h + i * rope_pairs);
      const size_t offset = size_t((d.filled + start) * rope_pairs);
      cuda::copy_to_device(d.cos.as<float>() + offset, cos_h, size_t(k * rope_pairs) * sizeof(float), stream);
      cuda::copy_to_device(d.sin.as<float>() + offset, sin_h, size_t(k * rope_pairs) * sizeof(float), stream);
    }
    return positions;
  }

  void ensure_scratch(int64_t n, int64_t n_logits) {
    if (n > scratch_tokens) {
      auto floats = [n](int64_t width) { return cuda::DeviceBuffer(size_t(n * width) * sizeof(float)); };
      tokens_d = cuda::DeviceBuffer(size_t(n) * sizeof(int32_t));
      x = floats(c.n_embd);
      xn = floats(c.n_embd);
      q = floats(q_width);
      attn = floats(q_width);
      proj = floats(std::max<int64_t>(c.n_embd, q_width));
      gate = floats(c.n_ff);
      up = floats(c.n_ff);
      kv_new = floats(2 * kv_width);
      scratch_tokens = n;
    }
    if (n_logits > logits_rows) {
      logits_d = cuda::DeviceBuffer(size_t(n_logits) * size_t(c.n_vocab) * sizeof(float));
      logits_rows = n_logits;
    }
    if (q8) {  // the widest input of any product: n_embd, the attention output or n_ff
      const size_t needed = cuda::matmul_q8_scratch_bytes(std::max({int64_t(c.n_embd), q_width, int64_t(c.n_ff)}), n);
      if (ws->q8_activations.bytes() < needed) ws->q8_activations = cuda::DeviceBuffer(needed);
    }
  }

  // A matrix product under the session's recipe.
  void product(std::span<const cuda::MatmulOutput> outputs, const float* in, int64_t in_stride, int64_t n) {
    if (q8)
      cuda::matmul_q8(outputs, in, in_stride, n, ws->q8_activations.data(), ws->q8_activations.bytes(), stream);
    else
      cuda::matmul(outputs, in, in_stride, n, stream);
  }

  // How many units of `unit_floats` one trip through a staging buffer
  // carries: as many as fit in staging_bytes, at least one.
  int64_t units_per_chunk(int64_t unit_floats) const {
    return std::max<int64_t>(1, int64_t(staging_bytes / (size_t(unit_floats) * sizeof(float))));
  }

  // Host rows [valid, p0) -> device, gathered into the mirror's layout
  // (valid advances only after the forward's final synchronisation). Through
  // kv_up in chunks of at most staging_bytes (a graft of a long prefix would
  // otherwise pin its whole size): a chunk is gathered only once the copy of
  // the previous one has finished reading the buffer.
  void upload_missing(const KvCache& host, int64_t p0) {
    if (valid >= p0) return;
    const int64_t count = p0 - valid;
    const int64_t per = std::min(count, units_per_chunk(position_floats));
    kv_up.fit(size_t(per * position_floats) * sizeof(float));
    float* stage = kv_up.as<float>();
    const size_t row_bytes = size_t(kv_width) * sizeof(float);
    for (int64_t start = 0; start < count; start += per) {
      if (start > 0) stream.synchronize();  // the previous chunk's copy has read `stage`
      const int64_t k = std::min(per, count - start);
      for (int64_t i = 0; i < k; ++i)
        for (int l = 0; l < c.n_layer; ++l) {
          float* dst = stage + i * position_floats + int64_t(2 * l) * kv_width;
          std::memcpy(dst, host.k(l, valid + start + i), row_bytes);
          std::memcpy(dst + kv_width, host.v(l, valid + start + i), row_bytes);
        }
      cuda::copy_to_device(kv.as<float>() + (valid + start) * position_floats, stage,
                           size_t(k * position_floats) * sizeof(float), stream);
    }
  }

  // Device -> host through `down` in chunks of whole units (KV positions or
  // logits rows) of at most staging_bytes; `take(first_unit, units, floats)`
  // receives each chunk once it has landed.
  template <class Take>
  void download(const float* src, int64_t units, int64_t unit_floats, Take take) {
    const int64_t per = std::min(units, units_per_chunk(unit_floats));
    down.fit(size_t(per * unit_floats) * sizeof(float));
    for (int64_t start = 0; start < units; start += per) {
      const int64_t k = std::min(per, units - start);
      cuda::copy_to_host(down.as<float>(), src + start * unit_floats, size_t(k * unit_floats) * sizeof(float), stream);
      stream.synchronize();
      take(start, k, down.as<const float>());
    }
  }

  void check_request(std::span<const int32_t> tokens, int64_t p0, const KvCache& host) const {
    for (size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] < 0 || tokens[i] >= c.n_vocab)
        throw Error(ErrorCode::InvalidArgument, "token id " + std::to_string(tokens[i]) + " at index " +
                                                    std::to_string(i) + " is outside the vocabulary [0, " +
                                                    std::to_string(c.n_vocab) + ")");
    if (p0 < 0 || p0 + int64_t(tokens.size()) > max_positions)
      throw Error(ErrorCode::OutOfRange, "positions " + std::to_string(p0) + ".." +
                                             std::to_string(p0 + int64_t(tokens.size())) + " exceed the GPU context of " +
                                             std::to_string(max_positions));
    if (host.n_layer() != c.n_layer || host.row_floats() != kv_width)
      throw Error(ErrorCode::Internal, "CudaForward: the host KV cache has another layout than the model");
  }

  // Before any device work: the request checked, the mirror told which host
  // cache it describes, the host cache's room for the new rows taken.
  void prepare(const CudaForwardPart& part) {
    check_request(part.tokens, part.p0, *part.host_cache);
    if (part.host_cache != mirrored) {  // another cache: nothing on the device describes it yet
      mirrored = part.host_cache;
      valid = 0;
    }
    valid = std::min(valid, part.p0);  // rows from p0 on are about to be recomputed
    part.host_cache->reserve(part.p0 + int64_t(part.tokens.size()));  // may throw
  }

  // Its mirror and rotary tables made ready for positions up to p0 + n, on
  // its own stream: what the pass reads of this forward's own state.
  Staged stage(const CudaForwardPart& part) {
    const int64_t end = part.p0 + int64_t(part.tokens.size());
    ensure_kv(end);
    upload_missing(*part.host_cache, part.p0);
    Staged staged;
    staged.rope_after = ensure_rope(ws->rope, rope, end);
    // The local table's rows go through rope_up after the global one's: wait
    // for those copies before overwriting it.
    if (uses_local_rope) stream.synchronize();
    staged.local_after = uses_local_rope ? ensure_rope(ws->rope_local, rope_local, end) : 0;
    return staged;
  }

  // The device work is done: the mirror and the rotary tables grow their
  // valid ranges here and nowhere earlier.
  void advance(const CudaForwardPart& part, const Staged& staged) {
    ws->rope.filled = staged.rope_after;
    if (uses_local_rope) ws->rope_local.filled = staged.local_after;
    valid = part.p0 + int64_t(part.tokens.size());
  }

  // A forward failed: the workspace may hold half-written state (or sit on a
  // failed device), so it is freed rather than handed on; copies and kernels
  // already queued may still read the staging buffers and write the mirror,
  // so they are waited for before the caller frees or reuses anything. Their
  // own error, if any, is this failure or a consequence of it (and a sticky
  // one is already recorded by check_status).
  void fail() noexcept {
    failed = true;
    try {
      stream.synchronize();
    } catch (...) {
    }
  }

  // One pass over `parts` (this Impl is the first's; every Impl is of this
  // model and recipe), on this workspace's stream and scratch: their rows go
  // through each product together, each attends its own mirror.
  void run_pass(std::span<const CudaForwardPart> parts, std::span<Impl* const> impls) {
    std::vector<PassRow> at(parts.size());
    int64_t n = 0, rows = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      const CudaForwardPart& part = parts[i];
      const int64_t tokens = int64_t(part.tokens.size());
      const bool want_logits = part.which != LogitsFor::None && part.logits != nullptr;
      at[i].first_row = n;
      at[i].first_logit_token = part.which == LogitsFor::All ? 0 : tokens - 1;
      at[i].logits_rows = want_logits ? tokens - at[i].first_logit_token : 0;
      at[i].first_logits_row = rows;
      n += tokens;
      rows += at[i].logits_rows;
    }
    ensure_scratch(n, rows);
    tokens_up.fit(size_t(n) * sizeof(int32_t));
    for (size_t i = 0; i < parts.size(); ++i)
      std::memcpy(tokens_up.as<int32_t>() + at[i].first_row, parts[i].tokens.data(),
                  parts[i].tokens.size() * sizeof(int32_t));
    cuda::copy_to_device(tokens_d.data(), tokens_up.data(), size_t(n) * sizeof(int32_t), stream);

    run_layers(parts, impls, at, n);
    for (size_t i = 0; i < parts.size(); ++i)
      if (at[i].logits_rows > 0)
        norm(x.as<float>() + (at[i].first_row + at[i].first_logit_token) * c.n_embd, weights->output_norm,
             weights->output_norm_b, at[i].logits_rows, xn.as<float>() + at[i].first_logits_row * c.n_embd);
    if (rows > 0) {
      const cuda::MatmulOutput head[1] = {{weights->output, logits_d.as<float>(), c.n_vocab}};
      product(head, xn.as<float>(), c.n_embd, rows);
      if (plan.final_softcap > 0) cuda::softcap_inplace(logits_d.as<float>(), plan.final_softcap, rows * c.n_vocab, stream);
    }
    for (size_t i = 0; i < parts.size(); ++i)
      deliver(*impls[i], parts[i], logits_d.as<const float>() + at[i].first_logits_row * c.n_vocab,
              at[i].logits_rows);
  }

  // A part's new KV rows (from its mirror) into its host cache, then its
  // logits rows: through this workspace's staging, in one buffer and one
  // wait when they fit in staging_bytes (the usual decode step), else chunk
  // by chunk.
  void deliver(const Impl& owner, const CudaForwardPart& part, const float* logits_rows_d, int64_t rows) {
    const int64_t n = int64_t(part.tokens.size()), p0 = part.p0;
    KvCache& host = *part.host_cache;
    const float* kv_d = owner.kv.as<const float>() + p0 * position_floats;
    const size_t kv_floats = size_t(n * position_floats);
    const size_t logit_floats = size_t(rows) * size_t(c.n_vocab);
    const size_t row_bytes = size_t(kv_width) * sizeof(float);
    auto scatter_kv = [&](int64_t first_position, int64_t count, const float* staged) {
      for (int64_t i = 0; i < count; ++i)
        for (int l = 0; l < c.n_layer; ++l) {
          const float* src = staged + i * position_floats + int64_t(2 * l) * kv_width;
          std::memcpy(host.k(l, p0 + first_position + i), src, row_bytes);
          std::memcpy(host.v(l, p0 + first_position + i), src + kv_width, row_bytes);
        }
    };
    if ((kv_floats + logit_floats) * sizeof(float) <= staging_bytes) {
      down.fit((kv_floats + logit_floats) * sizeof(float));
      float* kv_h = down.as<float>();
      cuda::copy_to_host(kv_h, kv_d, kv_floats * sizeof(float), stream);
      cuda::copy_to_host(kv_h + kv_floats, logits_rows_d, logit_floats * sizeof(float), stream);
      stream.synchronize();
      scatter_kv(0, n, kv_h);
      if (rows > 0) part.logits->assign(kv_h + kv_floats, kv_h + kv_floats + logit_floats);
    } else {
      // The first wait here also completes every kernel queued before.
      download(kv_d, n, position_floats, scatter_kv);
      if (rows > 0) {
        part.logits->resize(logit_floats);
        download(logits_rows_d, rows, c.n_vocab, [&](int64_t first_row, int64_t count, const float* staged) {
          std::memcpy(part.logits->data() + first_row * c.n_vocab, staged, size_t(count * c.n_vocab) * sizeof(float));
        });
      }
    }
  }

  // The plan's layers (engine/layer_plan.hpp), each step a kernel over the
  // pass's n rows, but rotary embedding and attention, which each part runs
  // at its own positions against its own mirror. A part alone writes its K
  // and V straight into its mirror at p0; parts together write them into
  // the pass's rows (kv_new), which are moved into each mirror before its
  // attention reads them.
  void run_layers(std::span<const CudaForwardPart> parts, std::span<Impl* const> impls, std::span<const PassRow> at,
                  int64_t n) {
    const int64_t S = position_floats;
    const bool alone = parts.size() == 1;
    float* xf = x.as<float>();
    float* xnf = xn.as<float>();
    float* qf = q.as<float>();
    const int64_t kv_stride = alone ? S : kv_width;

    cuda::embed_rows(weights->token_embedding, tokens_d.as<int32_t>(), n, xf, stream);
    if (plan.embed_scale > 0) cuda::scale_inplace(xf, plan.embed_scale, n * c.n_embd, stream);
    for (int l = 0; l < c.n_layer; ++l) {
      const DeviceWeights::Layer& w = weights->layers[size_t(l)];
      const LayerPlan& step = plan.layers[size_t(l)];
      const cuda::AttentionShape shape{c.n_head, c.n_head_kv, c.head_dim, plan.attn_scale, step.window,
                                       step.attn_softcap};
      // Attention block.
      norm(xf, w.attn_norm, w.attn_norm_b, n, xnf);
      float* k_new = alone ? k_rows(l) + parts[0].p0 * S : kv_new.as<float>();
      float* v_new = alone ? v_rows(l) + parts[0].p0 * S : kv_new.as<float>() + n * kv_width;
      const cuda::MatmulOutput qkv[3] = {{w.wq, qf, q_width}, {w.wk, k_new, kv_stride}, {w.wv, v_new, kv_stride}};
      product(qkv, xnf, c.n_embd, n);
      if (step.qkv_bias) {
        cuda::add_to_rows(qf, n, q_width, w.bq, q_width, stream);
        cuda::add_to_rows(k_new, n, kv_stride, w.bk, kv_width, stream);
        cuda::add_to_rows(v_new, n, kv_stride, w.bv, kv_width, stream);
      }
      if (step.qk_norm) {
        cuda::rmsnorm_heads(qf, n, q_width, c.n_head, c.head_dim, w.q_norm, plan.norm_eps, stream);
        cuda::rmsnorm_heads(k_new, n, kv_stride, c.n_head_kv, c.head_dim, w.k_norm, plan.norm_eps, stream);
      }
      for (size_t i = 0; i < parts.size(); ++i) {
        const Impl& owner = *impls[i];
        const int64_t p0 = parts[i].p0, rows = int64_t(parts[i].tokens.size()), r0 = at[i].first_row;
        const DeviceRope& rope_rows = step.local_rope ? owner.ws->rope_local : owner.ws->rope;
        const float* cos_p0 = rope_rows.cos.as<float>() + p0 * rope_pairs;
        const float* sin_p0 = rope_rows.sin.as<float>() + p0 * rope_pairs;
        cuda::apply_rope(qf + r0 * q_width, rows, q_width, c.n_head, c.head_dim, plan.rope.dim, cos_p0, sin_p0,
                         plan.rope_style, stream);
        cuda::apply_rope(k_new + r0 * kv_stride, rows, kv_stride, c.n_head_kv, c.head_dim, plan.rope.dim, cos_p0,
                         sin_p0, plan.rope_style, stream);
      }
      // Under a compact KV storage the mirror holds the rounded rows (forward.cpp).
      cuda::round_kv_rows(kv_rounding, k_new, n, kv_stride, c.n_head_kv, c.head_dim, stream);
      cuda::round_kv_rows(kv_rounding, v_new, n, kv_stride, c.n_head_kv, c.head_dim, stream);
      for (size_t i = 0; i < parts.size(); ++i) {
        const Impl& owner = *impls[i];
        const int64_t p0 = parts[i].p0, rows = int64_t(parts[i].tokens.size()), r0 = at[i].first_row;
        if (!alone) {
          cuda::copy_rows(owner.k_rows(l) + p0 * S, S, k_new + r0 * kv_width, kv_width, rows, kv_width, stream);
          cuda::copy_rows(owner.v_rows(l) + p0 * S, S, v_new + r0 * kv_width, kv_width, rows, kv_width, stream);
        }
        cuda::attention(qf + r0 * q_width, q_width, owner.k_rows(l), owner.v_rows(l), S, shape, p0, rows,
                        attn.as<float>() + r0 * q_width, q_width, stream);
      }
      const cuda::MatmulOutput o[1] = {{w.wo, proj.as<float>(), c.n_embd}};
      product(o, attn.as<float>(), q_width, n);
      if (step.out_bias) cuda::add_to_rows(proj.as<float>(), n, c.n_embd, w.bo, c.n_embd, stream);
      add_residual(step.post_norms ? w.attn_post_norm : nullptr, n);

      // Feed-forward block.
      norm(xf, w.ffn_norm, w.ffn_norm_b, n, xnf);
      if (step.ffn == FfnKind::GeluBiased) {
        const cuda::MatmulOutput up_proj[1] = {{w.w_up, gate.as<float>(), c.n_ff}};
        product(up_proj, xnf, c.n_embd, n);
        cuda::add_to_rows(gate.as<float>(), n, c.n_ff, w.b_up, c.n_ff, stream);
        cuda::gelu_inplace(gate.as<float>(), n * c.n_ff, stream);
      } else {
        const cuda::MatmulOutput gate_up[2] = {{w.w_gate, gate.as<float>(), c.n_ff}, {w.w_up, up.as<float>(), c.n_ff}};
        product(gate_up, xnf, c.n_embd, n);
        if (step.ffn == FfnKind::GeGluTanh)
          cuda::geglu(gate.as<float>(), up.as<float>(), gate.as<float>(), n * c.n_ff, stream);
        else
          cuda::swiglu(gate.as<float>(), up.as<float>(), gate.as<float>(), n * c.n_ff, stream);
      }
      const cuda::MatmulOutput down_proj[1] = {{w.w_down, proj.as<float>(), c.n_embd}};
      product(down_proj, gate.as<float>(), c.n_ff, n);
      if (step.ffn == FfnKind::GeluBiased) cuda::add_to_rows(proj.as<float>(), n, c.n_embd, w.b_down, c.n_embd, stream);
      add_residual(step.post_norms ? w.ffn_post_norm : nullptr, n);
    }
  }

  // The block and output norms: RMSNorm, or LayerNorm with its bias (forward.cpp's norm_row).
  void norm(const float* in, const float* w, const float* b, int64_t rows, float* out) {
    if (plan.norm == NormKind::LayerWithBias)
      cuda::layernorm(in, w, b, rows, c.n_embd, plan.norm_eps, out, stream);
    else
      cuda::rmsnorm(in, w, rows, c.n_embd, plan.norm_eps, out, stream);
  }

  // x += proj, or x += rmsnorm(proj) with a post-norm (forward.cpp's add_residual).
  void add_residual(const float* post_norm, int64_t n) {
    const float* delta = proj.as<float>();
    if (post_norm) {
      cuda::rmsnorm(proj.as<float>(), post_norm, n, c.n_embd, plan.norm_eps, xn.as<float>(), stream);
      delta = xn.as<float>();
    }
    cuda::add_inplace(x.as<float>(), delta, n * c.n_embd, stream);
  }
};

CudaForward::CudaForward(std::shared_ptr<const Model> model, int64_t max_positions, Recipe recipe,
                         size_t staging_bytes) {
  std::string why;
  if (!cuda_device_available(&why)) throw Error(ErrorCode::Unsupported, "no usable CUDA device: " + why);
  if (model->config().head_dim > 512)
    throw Error(ErrorCode::Unsupported, "CUDA forward: head_dim " + std::to_string(model->config().head_dim) +
                                            " exceeds 512");
  if (max_positions <= 0) throw Error(ErrorCode::InvalidArgument, "CUDA forward: max_positions must be positive");
  impl_ = std::make_unique<Impl>(std::move(model), max_positions, recipe, staging_bytes);
}

CudaForward::~CudaForward() = default;

int64_t CudaForward::weight_uploads() { return weight_upload_count.load(); }

int64_t CudaForward::batched_passes() { return batched_pass_count.load(); }

void CudaForward::forward(std::span<const int32_t> tokens, int64_t p0, LogitsFor which, std::vector<float>* logits,
                          KvCache& host_cache) {
  const CudaForwardPart alone[1] = {{this, tokens, p0, which, logits, &host_cache}};
  forward_batch(alone);
}

void CudaForward::forward_batch(std::span<const CudaForwardPart> parts) {
  std::vector<CudaForwardPart> computed;  // the parts with tokens
  std::vector<Impl*> impls;
  for (const CudaForwardPart& part : parts) {
    if (!part.forward || !part.host_cache)
      throw Error(ErrorCode::InvalidArgument, "a batched CUDA pass's part names no CudaForward or host cache");
    Impl& impl = *part.forward->impl_;
    if (!impls.empty() && (impl.model != impls.front()->model || !(impl.recipe == impls.front()->recipe)))
      throw Error(ErrorCode::InvalidArgument, "a batched CUDA pass runs one model and recipe");
    for (const CudaForwardPart& other : computed)
      if (other.forward == part.forward)
        throw Error(ErrorCode::InvalidArgument, "a CudaForward appears twice in one batched pass");
    impl.prepare(part);
    if (part.tokens.empty()) {
      if (part.logits) part.logits->clear();
      continue;
    }
    computed.push_back(part);
    impls.push_back(&impl);
  }
  if (computed.empty()) return;
  Impl& lead = *impls.front();
  std::vector<Staged> staged;
  try {
    for (size_t i = 0; i < computed.size(); ++i) staged.push_back(impls[i]->stage(computed[i]));
    // The pass runs on the lead's stream: the others' uploads land first.
    for (Impl* impl : impls)
      if (impl != &lead) impl->stream.synchronize();
    lead.run_pass(computed, impls);
  } catch (...) {
    for (Impl* impl : impls) impl->fail();
    throw;
  }
  for (size_t i = 0; i < computed.size(); ++i) impls[i]->advance(computed[i], staged[i]);
  if (computed.size() > 1) ++batched_pass_count;
}

void CudaForward::truncate(int64_t n) { impl_->valid = std::min(impl_->valid, std::max<int64_t>(n, 0)); }
int64_t CudaForward::device_positions() const { return impl_->valid; }
int64_t CudaForward::max_positions() const { return impl_->max_positions; }
std::string CudaForward::device_name() const { return impl_->device; }
const Recipe& CudaForward::recipe() const { return impl_->recipe; }

}  // namespace kvg

#else  // !KVG_HAVE_CUDA

namespace kvg {

struct CudaForward::Impl {};

CudaForward::CudaForward(std::shared_ptr<const Model>, int64_t, Recipe, size_t) {
  throw Error(ErrorCode::Unsupported, "this build has no CUDA support (configure with -DKVG_CUDA=ON and nvcc)");
}

CudaForward::~CudaForward() = default;

int64_t CudaForward::weight_uploads() { return 0; }
int64_t CudaForward::batched_passes() { return 0; }

void CudaForward::forward(std::span<const int32_t>, int64_t, LogitsFor, std::vector<float>*, KvCache&) {
  throw Error(ErrorCode::Unsupported, "this build has no CUDA support (configure with -DKVG_CUDA=ON and nvcc)");
}
void CudaForward::forward_batch(std::span<const CudaForwardPart>) {
  throw Error(ErrorCode::Unsupported, "this build has no CUDA support (configure with -DKVG_CUDA=ON and nvcc)");
}
void CudaForward::truncate(int64_t) {}
int64_t CudaForward::device_positions() const { return 0; }
int64_t CudaForward::max_positions() const { return 0; }
std::string CudaForward::device_name() const { return {}; }
const Recipe& CudaForward::recipe() const { return kDefaultRecipe; }

}  // namespace kvg

#endif
