#include "extension/src/engine_worker_protocol.hpp"

#include <array>
#include <cstring>
#include <type_traits>

namespace kvg::pg::engine_worker {

namespace {

// Both ends are this build on this machine: fixed-width values in the
// machine's byte order, lengths before contents.
class Writer {
 public:
  template <class T>
  void value(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  void bytes(const void* data, size_t n) {
    value(uint64_t(n));
    out_.append(static_cast<const char*>(data), n);
  }
  void text(std::string_view s) { bytes(s.data(), s.size()); }
  void tokens(const std::vector<int32_t>& t) { bytes(t.data(), t.size() * sizeof(int32_t)); }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <class T>
  T value() {
    T v;
    std::memcpy(&v, take(sizeof(T)), sizeof(T));
    return v;
  }
  std::string_view bytes() {
    const uint64_t n = value<uint64_t>();
    if (n > in_.size() - at_) fail();
    return {take(size_t(n)), size_t(n)};
  }
  std::vector<int32_t> tokens() {
    const std::string_view b = bytes();
    if (b.size() % sizeof(int32_t) != 0) fail();
    std::vector<int32_t> t(b.size() / sizeof(int32_t));
    std::memcpy(t.data(), b.data(), b.size());
    return t;
  }
  void end() const {
    if (at_ != in_.size()) fail();
  }

 private:
  const char* take(size_t n) {
    if (n > in_.size() - at_) fail();
    const char* p = in_.data() + at_;
    at_ += n;
    return p;
  }
  [[noreturn]] static void fail() {
    throw Error(ErrorCode::Corrupt, "the engine worker's message is cut short or malformed");
  }
  std::string_view in_;
  size_t at_ = 0;
};

}  // namespace

GenerateOptions GenerationRequest::generate_options() const {
  GenerateOptions options;
  options.max_new_tokens = max_new_tokens;
  options.sampling.temperature = temperature;
  options.sampling.top_k = top_k;
  options.sampling.top_p = top_p;
  options.sampling.seed = seed;
  options.stop_at_eos = stop_at_eos;
  options.stop_tokens = stop_tokens;
  options.prefill_chunk = prefill_chunk;
  return options;
}

std::string encode(const GenerationRequest& r) {
  Writer w;
  w.text(r.model_path);
  w.value(r.model_fingerprint);
  w.text(r.recipe);
  w.value(r.device);
  w.value(r.gpu_staging_bytes);
  w.value(r.max_kv_bytes);
  w.tokens(r.prompt);
  w.value(uint8_t(r.leaf.has_value()));
  w.value(r.leaf.value_or(Digest{}));
  w.value(r.database);
  w.value(uint64_t(r.links.size()));
  for (const auto& link : r.links) {
    w.value(link.id);
    w.value(link.loid);
  }
  w.value(r.max_new_tokens);
  w.value(r.temperature);
  w.value(r.top_k);
  w.value(r.top_p);
  w.value(r.seed);
  w.value(uint8_t(r.stop_at_eos));
  w.tokens(r.stop_tokens);
  w.value(r.prefill_chunk);
  w.value(uint8_t(r.answer_line));
  w.bytes(r.capture_ends.data(), r.capture_ends.size() * sizeof(int64_t));
  return w.take();
}

GenerationRequest decode_request(std::string_view bytes) {
  Reader in(bytes);
  GenerationRequest r;
  r.model_path = std::string(in.bytes());
  r.model_fingerprint = in.value<Digest>();
  r.recipe = std::string(in.bytes());
  r.device = in.value<Device>();
  r.gpu_staging_bytes = in.value<uint64_t>();
  r.max_kv_bytes = in.value<int64_t>();
  r.prompt = in.tokens();
  const bool has_leaf = in.value<uint8_t>() != 0;
  const Digest leaf = in.value<Digest>();
  if (has_leaf) r.leaf = leaf;
  r.database = in.value<uint32_t>();
  const uint64_t links = in.value<uint64_t>();
  if (links > bytes.size()) throw Error(ErrorCode::Corrupt, "the engine worker's request is malformed");
  for (uint64_t i = 0; i < links; ++i) {
    GenerationRequest::Link link;
    link.id = in.value<Digest>();
    link.loid = in.value<uint32_t>();
    r.links.push_back(link);
  }
  r.max_new_tokens = in.value<int64_t>();
  r.temperature = in.value<float>();
  r.top_k = in.value<int32_t>();
  r.top_p = in.value<float>();
  r.seed = in.value<uint64_t>();
  r.stop_at_eos = in.value<uint8_t>() != 0;
  r.stop_tokens = in.tokens();
  r.prefill_chunk = in.value<int64_t>();
  r.answer_line = in.value<uint8_t>() != 0;
  const std::string_view ends = in.bytes();
  if (ends.size() % sizeof(int64_t) != 0) throw Error(ErrorCode::Corrupt, "the engine worker's request is malformed");
  r.capture_ends.resize(ends.size() / sizeof(int64_t));
  std::memcpy(r.capture_ends.data(), ends.data(), ends.size());
  in.end();
  return r;
}

std::string encode_need(const std::vector<Digest>& ids) {
  Writer w;
  w.value(ReplyKind::Need);
  w.bytes(ids.data(), ids.size() * sizeof(Digest));
  return w.take();
}

std::string encode_token(int32_t token) {
  Writer w;
  w.value(ReplyKind::Token);
  w.value(token);
  return w.take();
}

std::string encode_link(const std::vector<uint8_t>& artifact) {
  Writer w;
  w.value(ReplyKind::Link);
  w.bytes(artifact.data(), artifact.size());
  return w.take();
}

std::string encode_done(const Done& d) {
  Writer w;
  w.value(ReplyKind::Done);
  w.value(uint8_t(d.stopped_at_eos));
  w.value(d.prefill_seconds);
  w.value(d.decode_seconds);
  w.value(d.grafted_tokens);
  w.value(d.graft_micros);
  w.value(d.batch_peak);
  return w.take();
}

namespace {

std::string failed(int32_t code, const char* sqlstate, std::string_view message) {
  Writer w;
  w.value(ReplyKind::Failed);
  w.value(code);
  char state[5];
  std::memcpy(state, sqlstate, 5);
  w.value(state);
  w.text(message.substr(0, 4000));
  return w.take();
}

}  // namespace

std::string encode_failed(const char* sqlstate, std::string_view message) { return failed(-1, sqlstate, message); }

std::string encode_failed(const Error& error) { return failed(int32_t(error.code()), "XX000", error.what()); }

Reply decode_reply(std::string_view bytes) {
  Reader in(bytes);
  Reply r;
  r.kind = in.value<ReplyKind>();
  switch (r.kind) {
    case ReplyKind::Token:
      r.token = in.value<int32_t>();
      break;
    case ReplyKind::Need: {
      const std::string_view b = in.bytes();
      if (b.size() % sizeof(Digest) != 0) throw Error(ErrorCode::Corrupt, "the engine worker's reply is malformed");
      r.need.resize(b.size() / sizeof(Digest));
      std::memcpy(r.need.data(), b.data(), b.size());
      break;
    }
    case ReplyKind::Link: {
      const std::string_view b = in.bytes();
      r.link.assign(b.begin(), b.end());
      break;
    }
    case ReplyKind::Done:
      r.done.stopped_at_eos = in.value<uint8_t>() != 0;
      r.done.prefill_seconds = in.value<double>();
      r.done.decode_seconds = in.value<double>();
      r.done.grafted_tokens = in.value<int64_t>();
      r.done.graft_micros = in.value<int64_t>();
      r.done.batch_peak = in.value<int32_t>();
      break;
    case ReplyKind::Failed: {
      const int32_t code = in.value<int32_t>();
      if (code > int32_t(ErrorCode::Internal)) throw Error(ErrorCode::Corrupt, "the engine worker's reply is malformed");
      if (code >= 0) r.failed.code = ErrorCode(code);
      const auto state = in.value<std::array<char, 5>>();
      std::memcpy(r.failed.sqlstate, state.data(), 5);
      r.failed.sqlstate[5] = '\0';
      r.failed.message = std::string(in.bytes());
      break;
    }
    default:
      throw Error(ErrorCode::Corrupt, "the engine worker's reply is of no known kind");
  }
  in.end();
  return r;
}

size_t supplied_bytes(const std::vector<std::pair<Digest, const std::vector<uint8_t>*>>& artifacts) {
  size_t n = sizeof(uint64_t);
  for (const auto& [id, bytes] : artifacts) n += sizeof(Digest) + sizeof(uint64_t) + bytes->size();
  return n;
}

void write_supplied(const std::vector<std::pair<Digest, const std::vector<uint8_t>*>>& artifacts, char* out) {
  auto put = [&out](const void* p, size_t n) {
    std::memcpy(out, p, n);
    out += n;
  };
  const uint64_t count = artifacts.size();
  put(&count, sizeof(count));
  for (const auto& [id, bytes] : artifacts) {
    const uint64_t n = bytes->size();
    put(&id, sizeof(id));
    put(&n, sizeof(n));
    put(bytes->data(), bytes->size());
  }
}

std::vector<std::pair<Digest, std::vector<uint8_t>>> read_supplied(std::string_view segment) {
  Reader in(segment);
  std::vector<std::pair<Digest, std::vector<uint8_t>>> out;
  const uint64_t count = in.value<uint64_t>();
  if (count > segment.size()) throw Error(ErrorCode::Corrupt, "the artifacts sent to the engine worker are malformed");
  for (uint64_t i = 0; i < count; ++i) {
    const Digest id = in.value<Digest>();
    const std::string_view b = in.bytes();
    out.emplace_back(id, std::vector<uint8_t>(b.begin(), b.end()));
  }
  return out;  // (a segment may be mapped longer than it was asked for)
}

}  // namespace kvg::pg::engine_worker
