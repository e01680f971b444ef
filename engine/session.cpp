// A Session's life: its device, its cache and its history. forward() is the
// dispatcher: the CUDA executor when the session runs on a GPU
// (engine/cuda_forward.cpp), else the CPU executor (engine/forward.cpp); both
// walk the model's plan (engine/layer_plan.hpp).
#include <algorithm>

#include "common/error.hpp"
#include "engine/session.hpp"

namespace kvg {

int64_t positions_reached(const Model& model, const EngineOptions& options) {
  const int64_t limit = options.context_limit > 0 ? options.context_limit : model.config().n_ctx;
  return options.max_context > 0 ? std::min(options.max_context, limit) : limit;
}

namespace {
// A model loaded to tokenize only (Model::load_without_weights) computes
// nothing: a Session of it would read weights that are not there.
std::shared_ptr<const Model> with_weights(std::shared_ptr<const Model> model) {
  if (!model->has_weights())
    throw Error(ErrorCode::Internal, "a session of a model loaded without its weights ('" + model->path() + "')");
  return model;
}
// The shared pool options name, when it has the threads they ask for; a
// pool of its own otherwise.
std::shared_ptr<ThreadPool> pool_for(const EngineOptions& options) {
  const int threads = std::max(1, options.threads);
  if (!options.pool) return std::make_shared<ThreadPool>(threads);
  if (options.pool->size() != threads)
    throw Error(ErrorCode::Internal, "a shared thread pool of " + std::to_string(options.pool->size()) +
                                         " threads for a session of " + std::to_string(threads));
  return options.pool;
}
}  // namespace

Session::Session(std::shared_ptr<const Model> model, EngineOptions options)
    : model_(with_weights(std::move(model))),
      options_(options),
      pool_(pool_for(options)),
      rope_(model_->plan().rope.table()),
      rope_local_(model_->plan().rope_local.table()),
      cache_(model_->config().n_layer, model_->config().kv_row_floats(), positions_reached(*model_, options),
             options.max_kv_bytes, options.kv_limit_name) {
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
  if (tokens.empty()) {
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
  const ForwardRequest alone[1] = {{this, tokens, which, logits}};
  forward_cpu(alone);
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
}

void Session::forward_batch(std::span<const ForwardRequest> requests) {
  // Every request is checked before anything is computed or cleared, so a
  // refused batch changes no session and no caller's logits.
  std::vector<ForwardRequest> parts;
  for (const ForwardRequest& r : requests) {
    if (!r.session) throw Error(ErrorCode::InvalidArgument, "a batched forward request names no session");
    if (r.tokens.empty()) continue;
    const Session& lead = parts.empty() ? *r.session : *parts.front().session;
    if (r.session->model_ != lead.model_)
      throw Error(ErrorCode::InvalidArgument, "a batched forward pass runs one model: " + r.session->model_->path() +
                                                  " cannot join " + lead.model_->path() +
                                                  " (a model loaded twice is two models)");
    if (!(r.session->options_.recipe == lead.options_.recipe) || r.session->options_.isa != lead.options_.isa)
      throw Error(ErrorCode::InvalidArgument, "a batched forward pass runs one recipe and ISA: " +
                                                  r.session->options_.recipe.name() + " on " +
                                                  isa_name(r.session->options_.isa) + " cannot join " +
                                                  lead.options_.recipe.name() + " on " + isa_name(lead.options_.isa));
    if (r.session->runs_on() != lead.runs_on())
      throw Error(ErrorCode::InvalidArgument, std::string("a batched forward pass runs on one device: a session on ") +
                                                  device_name(r.session->runs_on()) + " cannot join one on " +
                                                  device_name(lead.runs_on()));
    for (const ForwardRequest& p : parts)
      if (p.session == r.session) throw Error(ErrorCode::InvalidArgument, "a session appears twice in one batched forward pass");
    r.session->check_tokens(r.tokens);
    parts.push_back(r);
  }
  for (const ForwardRequest& r : requests)
    if (r.tokens.empty() && r.logits) r.logits->clear();
  if (parts.empty()) return;
  if (parts.front().session->cuda_) return forward_cuda_batch(parts);
  parts.front().session->forward_cpu(parts);
  for (const ForwardRequest& p : parts) p.session->tokens_.insert(p.session->tokens_.end(), p.tokens.begin(), p.tokens.end());
}

void Session::forward_cuda_batch(std::span<const ForwardRequest> parts) {
  std::vector<CudaForwardPart> on_gpu;
  for (const ForwardRequest& p : parts)
    on_gpu.push_back({p.session->cuda_.get(), p.tokens, p.session->n_past(), p.which, p.logits, &p.session->cache_});
  try {
    CudaForward::forward_batch(on_gpu);
  } catch (const Error& e) {
    // Out of device memory, no session changed: each takes its pass alone,
    // where Device::Auto falls back to the CPU (forward()).
    if (e.code() != ErrorCode::OutOfRange) throw;
    for (const ForwardRequest& p : parts) p.session->forward(p.tokens, p.which, p.logits);
    return;
  }
  parts.front().session->model_->check_weights_intact();
  for (const ForwardRequest& p : parts) p.session->tokens_.insert(p.session->tokens_.end(), p.tokens.begin(), p.tokens.end());
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

}  // namespace kvg
