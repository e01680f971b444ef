// Synthetic model generator: llama GGUF layout, counter-based random weights,
// byte-level vocabulary. Weights are produced in chunks of rows, in parallel,
// straight into the writer's stream.
#include "engine/synth_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <thread>

#include "engine/gguf/gguf_writer.hpp"
#include "kernels/cpu/float16.hpp"

namespace kvg {

namespace {

using gguf::TensorType;

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;
constexpr int kSpecialTokens = 3;  // <unk>, <s>, </s>
constexpr int kByteTokens = 256;

// splitmix64's output function: a bijection with good avalanche, so
// consecutive counters give independent-looking values.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline uint64_t stream_key(uint64_t seed, uint64_t tensor_index) { return mix64(seed + kGolden * (tensor_index + 1)); }

// [-1, 1) from the top 24 bits: the integer and the power-of-two scale are
// exact in f32, so the value is the same on every platform.
inline float uniform(uint64_t key, uint64_t element) {
  const uint64_t r = mix64(key + kGolden * (element + 1));
  const int32_t s = int32_t(r >> 40) * 2 - (int32_t(1) << 24);
  return float(s) * 0x1p-24f;
}

inline float matrix_scale(const SynthTensor& t) { return 1.0f / std::sqrt(float(t.ne[0])); }

[[noreturn]] void invalid(const std::string& message) { throw Error(ErrorCode::InvalidArgument, "synth model: " + message); }

TensorType parse_type(const std::string& type) {
  if (type == "f32") return TensorType::F32;
  if (type == "f16") return TensorType::F16;
  if (type == "q8_0") return TensorType::Q8_0;
  invalid("type '" + type + "' is not one of f32, f16, q8_0");
}

uint32_t file_type(TensorType t) {
  // llama_ftype: ALL_F32 = 0, MOSTLY_F16 = 1, MOSTLY_Q8_0 = 7.
  switch (t) {
    case TensorType::F16: return 1;
    case TensorType::Q8_0: return 7;
    default: return 0;
  }
}

void validate(const SynthOptions& o) {
  auto positive = [](int v, const char* name) {
    if (v <= 0) invalid(std::string(name) + " = " + std::to_string(v) + " must be positive");
  };
  positive(o.n_embd, "n_embd");
  positive(o.n_layer, "n_layer");
  positive(o.n_head, "n_head");
  positive(o.n_head_kv, "n_head_kv");
  positive(o.n_ff, "n_ff");
  positive(o.n_ctx, "n_ctx");
  if (o.n_vocab < kSpecialTokens + kByteTokens)
    invalid("n_vocab = " + std::to_string(o.n_vocab) + " is below " + std::to_string(kSpecialTokens + kByteTokens) +
            " (3 special tokens and 256 byte tokens)");
  if (o.n_embd % o.n_head != 0)
    invalid("n_embd = " + std::to_string(o.n_embd) + " is not a multiple of n_head = " + std::to_string(o.n_head));
  if ((o.n_embd / o.n_head) % 2 != 0)
    invalid("head dimension " + std::to_string(o.n_embd / o.n_head) + " is odd; RoPE rotates pairs");
  if (o.n_head % o.n_head_kv != 0)
    invalid("n_head = " + std::to_string(o.n_head) + " is not a multiple of n_head_kv = " + std::to_string(o.n_head_kv));
  if (!(o.rope_base > 0) || !std::isfinite(o.rope_base)) invalid("rope_base must be positive and finite");
  if (o.architecture != "llama" && o.architecture != "qwen2")
    invalid("architecture '" + o.architecture + "' is not one the generator writes (llama, qwen2)");
  const TensorType t = parse_type(o.type);
  const uint32_t block = gguf::block_shape(t)->elements;
  if (o.n_embd % block != 0 || o.n_ff % block != 0)
    invalid("type " + o.type + " needs n_embd and n_ff to be multiples of " + std::to_string(block));
}

// Lowercase strings in length-then-lexicographic order: a..z, aa..zz, ...
std::string nth_word(uint64_t n) {
  uint64_t length = 1, count = 26;
  while (n >= count) {
    n -= count;
    ++length;
    count *= 26;
  }
  std::string s(length, 'a');
  for (uint64_t i = length; i-- > 0; n /= 26) s[i] = char('a' + n % 26);
  return s;
}

// Splits [0, rows) across threads; each thread handles whole rows, so the
// encoded bytes are identical whatever the thread count.
template <class Fn>
void parallel_rows(uint64_t rows, unsigned threads, const Fn& fn) {
  if (threads <= 1 || rows < 2) {
    fn(0, rows);
    return;
  }
  threads = unsigned(std::min<uint64_t>(threads, rows));
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  std::vector<std::exception_ptr> errors(threads);  // one slot per thread: no shared writes
  for (unsigned t = 1; t < threads; ++t) {
    pool.emplace_back([&, t] {
      try {
        fn(rows * t / threads, rows * (t + 1) / threads);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  }
  try {
    fn(0, rows / threads);
  } catch (...) {
    errors[0] = std::current_exception();
  }
  for (std::thread& th : pool) th.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

void encode_row(TensorType type, const float* x, size_t n, uint8_t* out) {
  switch (type) {
    case TensorType::F32: std::memcpy(out, x, n * sizeof(float)); break;
    case TensorType::F16:
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_f16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      break;
    case TensorType::Q8_0: encode_q8_0(x, n, out); break;
    default: invalid(std::string("cannot encode ") + gguf::tensor_type_name(type));
  }
}

// Streams one tensor: chunks of rows are generated in parallel, then written.
gguf::TensorProducer tensor_producer(uint64_t seed, uint64_t index, SynthTensor tensor) {
  return [seed, index, tensor = std::move(tensor)](gguf::TensorSink& sink) {
    const uint64_t row_elems = tensor.ne[0];
    const uint64_t rows = tensor.ne.size() > 1 ? tensor.ne[1] : 1;
    const uint64_t row_bytes = gguf::Writer::tensor_bytes(std::vector<uint64_t>{row_elems}, tensor.type);
    // About 8 MiB of output per chunk: large enough to amortise the threads,
    // small enough that memory stays flat.
    const uint64_t chunk_rows = std::max<uint64_t>(1, (uint64_t(8) << 20) / row_bytes);
    const unsigned threads = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
    const uint64_t key = stream_key(seed, index);
    const float scale = tensor.norm ? 0.0f : matrix_scale(tensor);
    std::vector<uint8_t> out(std::min(rows, chunk_rows) * row_bytes);
    for (uint64_t first = 0; first < rows; first += chunk_rows) {
      const uint64_t n_rows = std::min(chunk_rows, rows - first);
      parallel_rows(n_rows, threads, [&](uint64_t lo, uint64_t hi) {
        std::vector<float> x(row_elems);
        for (uint64_t r = lo; r < hi; ++r) {
          const uint64_t base = (first + r) * row_elems;
          if (tensor.norm) {
            for (uint64_t i = 0; i < row_elems; ++i) x[i] = 1.0f + uniform(key, base + i) * 0x1p-4f;
          } else {
            for (uint64_t i = 0; i < row_elems; ++i) x[i] = uniform(key, base + i) * scale;
          }
          encode_row(tensor.type, x.data(), row_elems, out.data() + r * row_bytes);
        }
      });
      sink.write(out.data(), n_rows * row_bytes);
    }
  };
}

}  // namespace

void encode_q8_0(const float* x, size_t n, uint8_t* out) {
  constexpr size_t kBlock = 32;
  if (n % kBlock != 0) invalid("Q8_0 needs a multiple of 32 values, got " + std::to_string(n));
  for (size_t b = 0; b < n / kBlock; ++b, x += kBlock, out += 34) {
    float amax = 0.0f;
    for (size_t i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
    const uint16_t dh = f32_to_f16(amax / 127.0f);
    const float d = f16_to_f32(dh);  // quantise against the scale the reader will see
    std::memcpy(out, &dh, 2);
    int8_t* q = reinterpret_cast<int8_t*>(out + 2);
    for (size_t i = 0; i < kBlock; ++i) {
      // d can round below amax / 127, so x / d may exceed 127: clamp.
      const float v = d == 0.0f ? 0.0f : std::round(x[i] / d);
      q[i] = int8_t(std::clamp(v, -127.0f, 127.0f));
    }
  }
}

float synth_weight(uint64_t seed, uint64_t tensor_index, const SynthTensor& tensor, uint64_t element) {
  const float u = uniform(stream_key(seed, tensor_index), element);
  return tensor.norm ? 1.0f + u * 0x1p-4f : u * matrix_scale(tensor);
}

std::vector<SynthTensor> synth_tensors(const SynthOptions& o) {
  validate(o);
  const TensorType mat = parse_type(o.type);
  const uint64_t embd = uint64_t(o.n_embd), ff = uint64_t(o.n_ff), vocab = uint64_t(o.n_vocab);
  const uint64_t kv = embd / uint64_t(o.n_head) * uint64_t(o.n_head_kv);
  std::vector<SynthTensor> t;
  t.push_back({"token_embd.weight", {embd, vocab}, mat, false});
  t.push_back({"output_norm.weight", {embd}, TensorType::F32, true});
  t.push_back({"output.weight", {embd, vocab}, mat, false});
  for (int l = 0; l < o.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    t.push_back({p + "attn_norm.weight", {embd}, TensorType::F32, true});
    t.push_back({p + "attn_q.weight", {embd, embd}, mat, false});
    t.push_back({p + "attn_k.weight", {embd, kv}, mat, false});
    t.push_back({p + "attn_v.weight", {embd, kv}, mat, false});
    if (o.architecture == "qwen2") {  // biases: small random vectors, always f32
      t.push_back({p + "attn_q.bias", {embd}, TensorType::F32, false});
      t.push_back({p + "attn_k.bias", {kv}, TensorType::F32, false});
      t.push_back({p + "attn_v.bias", {kv}, TensorType::F32, false});
    }
    t.push_back({p + "attn_output.weight", {embd, embd}, mat, false});
    t.push_back({p + "ffn_norm.weight", {embd}, TensorType::F32, true});
    t.push_back({p + "ffn_gate.weight", {embd, ff}, mat, false});
    t.push_back({p + "ffn_up.weight", {embd, ff}, mat, false});
    t.push_back({p + "ffn_down.weight", {ff, embd}, mat, false});
  }
  return t;
}

SynthVocab synth_vocab(int n_vocab) {
  if (n_vocab < kSpecialTokens + kByteTokens) invalid("n_vocab = " + std::to_string(n_vocab) + " is below 259");
  SynthVocab v;
  auto add = [&](std::string piece, float score, int32_t type) {
    v.pieces.push_back(std::move(piece));
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  // Token types as in tokenizer.ggml.token_type: 1 normal, 2 unknown, 3 control, 6 byte.
  add("<unk>", 0.0f, 2);
  add("<s>", 0.0f, 3);
  add("</s>", 0.0f, 3);
  static const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < kByteTokens; ++b) add(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">", 0.0f, 6);

  // Normal pieces: "▁", the printable ASCII characters, then "▁w" and "w" for
  // words w = a, b, ..., aa, ... Every prefix of a piece is itself a piece,
  // so SentencePiece merging can reach each one. Earlier pieces score higher.
  const std::string space = "\xe2\x96\x81";  // U+2581, SentencePiece's space
  std::vector<std::string> normal;
  normal.push_back(space);
  for (char c = 0x21; c < 0x7f; ++c) normal.emplace_back(1, c);
  const size_t wanted = size_t(n_vocab - kSpecialTokens - kByteTokens);
  for (uint64_t w = 0; normal.size() < wanted; ++w) {
    const std::string word = nth_word(w);
    normal.push_back(space + word);
    if (word.size() > 1) normal.push_back(word);  // single letters are already in
  }
  normal.resize(wanted);
  for (size_t i = 0; i < normal.size(); ++i) add(std::move(normal[i]), -float(i), 1);
  return v;
}

void add_synth_metadata(gguf::Writer& w, const SynthOptions& o, const std::string& name) {
  const SynthVocab vocab = synth_vocab(o.n_vocab);
  const TensorType mat = parse_type(o.type);
  w.add_string("general.architecture", o.architecture);
  const std::string a = o.architecture + ".";
  w.add_string("general.name", name);
  w.add_u32("general.file_type", file_type(mat));
  if (mat == TensorType::Q8_0) w.add_u32("general.quantization_version", 2);
  w.add_u32(a + "context_length", uint32_t(o.n_ctx));
  w.add_u32(a + "embedding_length", uint32_t(o.n_embd));
  w.add_u32(a + "feed_forward_length", uint32_t(o.n_ff));
  w.add_u32(a + "block_count", uint32_t(o.n_layer));
  w.add_u32(a + "attention.head_count", uint32_t(o.n_head));
  w.add_u32(a + "attention.head_count_kv", uint32_t(o.n_head_kv));
  w.add_u32(a + "rope.dimension_count", uint32_t(o.n_embd / o.n_head));
  w.add_f32(a + "rope.freq_base", o.rope_base);
  w.add_f32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  w.add_u32(a + "vocab_size", uint32_t(o.n_vocab));
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_array("tokenizer.ggml.tokens", std::span<const std::string>(vocab.pieces));
  w.add_array("tokenizer.ggml.scores", std::span<const float>(vocab.scores));
  w.add_array("tokenizer.ggml.token_type", std::span<const int32_t>(vocab.types));
  w.add_u32("tokenizer.ggml.unknown_token_id", 0);
  w.add_u32("tokenizer.ggml.bos_token_id", 1);
  w.add_u32("tokenizer.ggml.eos_token_id", 2);
  w.add_bool("tokenizer.ggml.add_bos_token", true);
  w.add_bool("tokenizer.ggml.add_eos_token", false);

}

// Passes a tensor's bytes on, reporting the running total of all tensors.
class CountingSink final : public gguf::TensorSink {
 public:
  CountingSink(gguf::TensorSink& inner, int64_t& done, int64_t total, const ProgressReport& report)
      : inner_(inner), done_(done), total_(total), report_(report) {}
  void write(const void* data, size_t n) override {
    inner_.write(data, n);
    done_ += int64_t(n);
    report_(done_, total_);
  }

 private:
  gguf::TensorSink& inner_;
  int64_t& done_;
  const int64_t total_;
  const ProgressReport& report_;
};

void write_synth_model(const SynthOptions& o, const std::string& path, const ProgressReport& report) {
  const std::vector<SynthTensor> tensors = synth_tensors(o);  // validates
  gguf::Writer w;
  add_synth_metadata(w, o, "kvg-synth " + std::to_string(o.n_embd) + "x" + std::to_string(o.n_layer) + " " + o.type +
                               " seed " + std::to_string(o.seed));
  int64_t total = 0, done = 0;  // tensor bytes; `done` outlives every producer (w.write below)
  for (const SynthTensor& t : tensors) total += int64_t(gguf::Writer::tensor_bytes(t.ne, t.type));
  for (size_t i = 0; i < tensors.size(); ++i) {
    gguf::TensorProducer produce = tensor_producer(o.seed, i, tensors[i]);
    if (report)
      produce = [produce = std::move(produce), &done, total, &report](gguf::TensorSink& sink) {
        CountingSink counting(sink, done, total, report);
        produce(counting);
      };
    w.add_tensor(tensors[i].name, tensors[i].ne, tensors[i].type, std::move(produce));
  }
  if (report) report(0, total);
  w.write(path);
}

}  // namespace kvg
