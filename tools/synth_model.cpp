// Synthetic model generator: llama GGUF layout, counter-based random weights,
// byte-level vocabulary. Weights are produced in chunks of rows, in parallel,
// straight into the writer's stream.
#include "tools/synth_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <thread>
#include <utility>

#include "engine/architectures.hpp"
#include "kernels/cpu/float16.hpp"
#include "tools/gguf_writer.hpp"

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

constexpr std::pair<const char*, TensorType> kTypes[] = {
    {"f32", TensorType::F32},   {"f16", TensorType::F16},   {"q8_0", TensorType::Q8_0},
    {"q4_1", TensorType::Q4_1}, {"q5_0", TensorType::Q5_0}, {"q5_1", TensorType::Q5_1},
    {"q2_k", TensorType::Q2_K}, {"q3_k", TensorType::Q3_K}, {"q5_k", TensorType::Q5_K},
    {"q4_k", TensorType::Q4_K}, {"q6_k", TensorType::Q6_K},
};

// "q4_k_m": the per-tensor mix llama.cpp's quantizer writes for Q4_K_M (see
// matrix_type below); every other name is one type for every matrix.
constexpr const char* kQ4KM = "q4_k_m";

TensorType parse_type(const std::string& type) {
  if (type == kQ4KM) return TensorType::Q4_K;
  std::string known;
  for (const auto& [name, t] : kTypes) {
    if (type == name) return t;
    known += std::string(known.empty() ? "" : ", ") + name;
  }
  invalid("type '" + type + "' is not one of " + known + ", " + kQ4KM);
}

// Q4_K_M as llama.cpp's llama-quantize assigns it: Q6_K for the output
// matrix, and for attn_v and ffn_down on the layers where use_more_bits()
// holds (the first and last eighth, and every third layer between); Q4_K
// everywhere else. Reproduced here so decode speed on the mix most people
// download can be measured without the peer's quantizer.
bool q4_k_m_more_bits(int layer, int n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

enum class MatrixRole { Output, AttnV, FfnDown, Other };

TensorType matrix_type(const SynthOptions& o, MatrixRole role, int layer) {
  const TensorType base = parse_type(o.type);
  if (o.type != kQ4KM) return base;
  if (role == MatrixRole::Output) return TensorType::Q6_K;
  if ((role == MatrixRole::AttnV || role == MatrixRole::FfnDown) && q4_k_m_more_bits(layer, o.n_layer))
    return TensorType::Q6_K;
  return TensorType::Q4_K;
}

uint32_t file_type(TensorType t) {
  // llama_ftype: ALL_F32 = 0, MOSTLY_F16 = 1, Q4_1 = 3, Q8_0 = 7, Q5_0 = 8,
  // Q5_1 = 9, Q2_K = 10, Q3_K_S = 11, Q4_K_S = 14, Q4_K_M = 15, Q5_K_S = 16,
  // Q6_K = 18.
  switch (t) {
    case TensorType::F16: return 1;
    case TensorType::Q4_1: return 3;
    case TensorType::Q8_0: return 7;
    case TensorType::Q5_0: return 8;
    case TensorType::Q5_1: return 9;
    case TensorType::Q2_K: return 10;
    case TensorType::Q3_K: return 11;
    case TensorType::Q5_K: return 16;
    case TensorType::Q4_K: return 14;  // Q4_K_S (the q4_k_m mix writes 15 itself)
    case TensorType::Q6_K: return 18;
    default: return 0;
  }
}

// The quantizers below are deliberately simple (one scale per block, or
// every K-quant sub-block scale at its maximum): the models are noise, and
// what tests exercise is the decoders. Each scale is quantized to f16 first
// and the integers are chosen against the rounded scale the reader sees.
float f16_round(float x, uint16_t* bits) {
  *bits = f32_to_f16(x);
  return f16_to_f32(*bits);
}

int quantize(float x, float offset, float d, int lo, int hi) {
  if (d == 0.0f) return std::clamp(0, lo, hi);
  return int(std::clamp(std::round((x - offset) / d), float(lo), float(hi)));
}

void put_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// Q4_1 / Q5_1: w = d*q + m over [min, max]; Q5_0: w = d*(q-16).
void encode_q4_1_q5(TensorType type, const float* x, size_t n, uint8_t* out) {
  const bool five = type != TensorType::Q4_1, with_min = type != TensorType::Q5_0;
  const size_t bytes = type == TensorType::Q4_1 ? 20 : type == TensorType::Q5_0 ? 22 : 24;
  const int top = five ? 31 : 15;
  for (size_t b = 0; b < n / 32; ++b, x += 32, out += bytes) {
    float mn = x[0], mx = x[0], amax = 0.0f;
    for (int i = 0; i < 32; ++i) {
      mn = std::min(mn, x[i]);
      mx = std::max(mx, x[i]);
      amax = std::max(amax, std::fabs(x[i]));
    }
    uint16_t dh, mh = 0;
    const float d = f16_round(with_min ? (mx - mn) / float(top) : amax / 15.0f, &dh);
    const float m = with_min ? f16_round(mn, &mh) : 0.0f;
    put_u16(out, dh);
    if (with_min) put_u16(out + 2, mh);
    uint8_t* qh = out + (with_min ? 4 : 2);
    uint8_t* qs = five ? qh + 4 : qh;
    std::memset(qh, 0, five ? 20 : 16);
    for (int i = 0; i < 32; ++i) {
      const int q = with_min ? quantize(x[i], m, d, 0, top) : quantize(x[i], 0.0f, d, -16, 15) + 16;
      qs[i % 16] |= uint8_t((q & 15) << (i < 16 ? 0 : 4));
      if (five) qh[i / 8] |= uint8_t(((q >> 4) & 1) << (i % 8));
    }
  }
}

// Q2_K, Q3_K, Q5_K: every sub-block (scale, min) at its largest value.
void encode_k(TensorType type, const float* x, size_t n, uint8_t* out) {
  const size_t bytes = type == TensorType::Q2_K ? 84 : type == TensorType::Q3_K ? 110 : 176;
  for (size_t b = 0; b < n / 256; ++b, x += 256, out += bytes) {
    float amax = 0.0f;
    for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(x[i]));
    std::memset(out, 0, bytes);
    uint16_t dh, mh;
    if (type == TensorType::Q2_K) {  // scale 15, min 15: w = 15d*q - 15dmin, q in 0..3
      const float d = 15.0f * f16_round(2.0f * amax / 45.0f, &dh), dmin = 15.0f * f16_round(amax / 15.0f, &mh);
      std::memset(out, 0xff, 16);
      put_u16(out + 80, dh);
      put_u16(out + 82, mh);
      for (int e = 0; e < 256; ++e) {
        const int q = quantize(x[e], -dmin, d, 0, 3);
        out[16 + (e / 128) * 32 + e % 32] |= uint8_t(q << (2 * ((e % 128) / 32)));
      }
    } else if (type == TensorType::Q3_K) {  // scale 63 - 32 = 31: w = 31d*q, q in -4..3
      const float d = 31.0f * f16_round(amax / 124.0f, &dh);
      std::memset(out + 96, 0xff, 12);
      put_u16(out + 108, dh);
      for (int e = 0; e < 256; ++e) {
        const int q = quantize(x[e], 0.0f, d, -4, 3);
        const int half = e / 128, j = (e % 128) / 32, l = e % 32;
        out[32 + half * 32 + l] |= uint8_t((q < 0 ? q + 4 : q) << (2 * j));
        if (q >= 0) out[l] |= uint8_t(1 << (half * 4 + j));
      }
    } else {  // Q5_K, scale 63, min 63: w = 63d*q - 63dmin, q in 0..31
      const float d = 63.0f * f16_round(2.0f * amax / (63.0f * 31.0f), &dh), dmin = 63.0f * f16_round(amax / 63.0f, &mh);
      put_u16(out, dh);
      put_u16(out + 2, mh);
      std::memset(out + 4, 0xff, 12);
      for (int e = 0; e < 256; ++e) {
        const int q = quantize(x[e], -dmin, d, 0, 31), sub = e / 32, l = e % 32;
        out[48 + (e / 64) * 32 + l] |= uint8_t((q & 15) << ((sub & 1) ? 4 : 0));
        out[16 + l] |= uint8_t(((q >> 4) & 1) << sub);
      }
    }
  }
}

// Q4_K: every sub-block (scale, min) at 63: w = 63d*q - 63dmin, q in 0..15.
void encode_q4_k(const float* x, size_t n, uint8_t* out) {
  for (size_t b = 0; b < n / 256; ++b, x += 256, out += 144) {
    float amax = 0.0f;
    for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(x[i]));
    std::memset(out, 0, 144);
    uint16_t dh, mh;
    const float d = 63.0f * f16_round(2.0f * amax / (63.0f * 15.0f), &dh), dmin = 63.0f * f16_round(amax / 63.0f, &mh);
    put_u16(out, dh);
    put_u16(out + 2, mh);
    std::memset(out + 4, 0xff, 12);
    for (int e = 0; e < 256; ++e) {
      const int q = quantize(x[e], -dmin, d, 0, 15);
      out[16 + (e / 64) * 32 + e % 32] |= uint8_t(q << (((e / 32) & 1) ? 4 : 0));
    }
  }
}

// Q6_K: every sub-block scale at 127: w = (127d)*(q-32), q-32 in -32..31.
void encode_q6_k(const float* x, size_t n, uint8_t* out) {
  for (size_t b = 0; b < n / 256; ++b, x += 256, out += 210) {
    float amax = 0.0f;
    for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(x[i]));
    std::memset(out, 0, 210);
    uint16_t dh;
    const float d = 127.0f * f16_round(amax / (127.0f * 32.0f), &dh);
    std::memset(out + 192, 127, 16);
    put_u16(out + 208, dh);
    for (int e = 0; e < 256; ++e) {
      const int q = quantize(x[e], 0.0f, d, -32, 31) + 32;
      const int half = e / 128, quarter = (e % 128) / 32, l = e % 32;
      out[half * 64 + (quarter & 1) * 32 + l] |= uint8_t((q & 15) << (quarter < 2 ? 0 : 4));
      out[128 + half * 32 + l] |= uint8_t((q >> 4) << (2 * quarter));
    }
  }
}

// The family's row (engine/architectures.hpp): the generator writes what
// the loader reads for it, so it writes every family the engine runs.
const ArchitectureTraits& family_of(const SynthOptions& o) {
  for (const ArchitectureTraits& traits : kArchitectures)
    if (o.architecture == traits.name) return traits;
  std::string known;
  for (const ArchitectureTraits& traits : kArchitectures) known += std::string(known.empty() ? "" : ", ") + traits.name;
  invalid("architecture '" + o.architecture + "' is not one the generator writes (" + known + ")");
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
  if (o.llama3_rope && !family_of(o).rope_freqs)
    invalid("llama3_rope writes rope_freqs.weight, which architecture " + o.architecture + " does not read");
  if (o.sliding_window < 0 || o.attn_softcap < 0 || o.final_softcap < 0 || o.rope_scale < 0)
    invalid("sliding_window, soft-caps and rope_scale must not be negative");
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
    case TensorType::Q4_1:
    case TensorType::Q5_0:
    case TensorType::Q5_1: encode_q4_1_q5(type, x, n, out); break;
    case TensorType::Q2_K:
    case TensorType::Q3_K:
    case TensorType::Q5_K: encode_k(type, x, n, out); break;
    case TensorType::Q4_K: encode_q4_k(x, n, out); break;
    case TensorType::Q6_K: encode_q6_k(x, n, out); break;
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
    const float scale = tensor.norm || tensor.rope_freqs ? 0.0f : matrix_scale(tensor);
    std::vector<uint8_t> out(std::min(rows, chunk_rows) * row_bytes);
    for (uint64_t first = 0; first < rows; first += chunk_rows) {
      const uint64_t n_rows = std::min(chunk_rows, rows - first);
      parallel_rows(n_rows, threads, [&](uint64_t lo, uint64_t hi) {
        std::vector<float> x(row_elems);
        for (uint64_t r = lo; r < hi; ++r) {
          const uint64_t base = (first + r) * row_elems;
          if (tensor.rope_freqs) {
            for (uint64_t i = 0; i < row_elems; ++i) x[i] = synth_weight(seed, index, tensor, base + i);
          } else if (tensor.norm) {
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

// Llama 3.1's rope frequency factors for pair i of n (rope base 10000 as the
// generator writes it): 1 for short wavelengths, 8 for long ones, a smooth
// blend between (computed in double, rounded once).
float llama3_factor(uint64_t i, uint64_t n_pairs, double base) {
  constexpr double kFactor = 8, kLow = 1, kHigh = 4, kOldContext = 8192, kPi = 3.14159265358979323846;
  const double freq = std::pow(base, -double(2 * i) / double(2 * n_pairs));
  const double wavelen = 2 * kPi / freq;
  if (wavelen < kOldContext / kHigh) return 1.0f;
  if (wavelen > kOldContext / kLow) return float(kFactor);
  const double smooth = (kOldContext / wavelen - kLow) / (kHigh - kLow);
  return float(1.0 / ((1.0 - smooth) / kFactor + smooth));
}

float synth_weight(uint64_t seed, uint64_t tensor_index, const SynthTensor& tensor, uint64_t element) {
  if (tensor.rope_freqs) return llama3_factor(element, tensor.ne[0], 10000.0);
  const float u = uniform(stream_key(seed, tensor_index), element);
  return tensor.norm ? 1.0f + u * 0x1p-4f : u * matrix_scale(tensor);
}

std::vector<SynthTensor> synth_tensors(const SynthOptions& o) {
  validate(o);
  const ArchitectureTraits& family = family_of(o);
  auto mat_of = [&](MatrixRole role, int layer) { return matrix_type(o, role, layer); };
  const TensorType mat = mat_of(MatrixRole::Other, 0);
  const uint64_t embd = uint64_t(o.n_embd), ff = uint64_t(o.n_ff), vocab = uint64_t(o.n_vocab);
  const uint64_t kv = embd / uint64_t(o.n_head) * uint64_t(o.n_head_kv);
  const uint64_t head_dim = embd / uint64_t(o.n_head);
  // Biases are small random vectors, always f32; so are LayerNorm biases.
  std::vector<SynthTensor> t;
  auto bias = [&](std::string name, uint64_t n) { t.push_back({std::move(name), {n}, TensorType::F32, false}); };
  auto norm = [&](std::string name, uint64_t n) { t.push_back({std::move(name), {n}, TensorType::F32, true}); };
  t.push_back({"token_embd.weight", {embd, vocab}, mat, false});
  norm("output_norm.weight", embd);
  if (family.layer_norm) bias("output_norm.bias", embd);
  if (!family.tied_head) t.push_back({"output.weight", {embd, vocab}, mat_of(MatrixRole::Output, 0), false});
  for (int l = 0; l < o.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    norm(p + "attn_norm.weight", embd);
    if (family.layer_norm) bias(p + "attn_norm.bias", embd);
    if (family.fused) {
      t.push_back({p + "attn_qkv.weight", {embd, embd + 2 * kv}, mat, false});
    } else {
      t.push_back({p + "attn_q.weight", {embd, embd}, mat, false});
      t.push_back({p + "attn_k.weight", {embd, kv}, mat, false});
      t.push_back({p + "attn_v.weight", {embd, kv}, mat_of(MatrixRole::AttnV, l), false});
    }
    if (family.qkv_bias) {
      bias(p + "attn_q.bias", embd);
      bias(p + "attn_k.bias", kv);
      bias(p + "attn_v.bias", kv);
    }
    if (family.qk_norm) {
      norm(p + "attn_q_norm.weight", head_dim);
      norm(p + "attn_k_norm.weight", head_dim);
    }
    t.push_back({p + "attn_output.weight", {embd, embd}, mat, false});
    if (family.layer_norm) bias(p + "attn_output.bias", embd);
    if (family.post_norms) norm(p + "post_attention_norm.weight", embd);
    norm(p + "ffn_norm.weight", embd);
    if (family.layer_norm) {  // LayerNorm bias; an ungated FFN with biases
      bias(p + "ffn_norm.bias", embd);
      t.push_back({p + "ffn_up.weight", {embd, ff}, mat, false});
      bias(p + "ffn_up.bias", ff);
    } else if (family.fused) {
      t.push_back({p + "ffn_up.weight", {embd, 2 * ff}, mat, false});  // [gate; up]
    } else {
      t.push_back({p + "ffn_gate.weight", {embd, ff}, mat, false});
      t.push_back({p + "ffn_up.weight", {embd, ff}, mat, false});
    }
    t.push_back({p + "ffn_down.weight", {ff, embd}, mat_of(MatrixRole::FfnDown, l), false});
    if (family.layer_norm) bias(p + "ffn_down.bias", embd);
    if (family.post_norms) norm(p + "post_ffw_norm.weight", embd);
  }
  // Last, so that every other weight equals the plain llama model's of the same seed.
  if (o.llama3_rope) t.push_back({"rope_freqs.weight", {head_dim / 2}, TensorType::F32, false, true});
  return t;
}

const char* const kSynthChatmlTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

SynthVocab synth_vocab(int n_vocab, bool chatml) {
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
  if (chatml) {
    // The last two ids, so that every other piece keeps its id.
    const size_t n = v.pieces.size();
    v.pieces[n - 2] = "<|im_start|>";
    v.pieces[n - 1] = "<|im_end|>";
    v.scores[n - 2] = v.scores[n - 1] = 0.0f;
    v.types[n - 2] = v.types[n - 1] = 3;
  }
  return v;
}

void add_synth_metadata(gguf::Writer& w, const SynthOptions& o, const std::string& name) {
  if (!o.chat_template.empty() && o.chat_template != "chatml")
    invalid("chat template '" + o.chat_template + "' is not one synth writes (chatml)");
  const SynthVocab vocab = synth_vocab(o.n_vocab, !o.chat_template.empty());
  const ArchitectureTraits& family = family_of(o);
  const TensorType mat = parse_type(o.type);
  w.add_string("general.architecture", o.architecture);
  const std::string a = o.architecture + ".";
  w.add_string("general.name", name);
  w.add_u32("general.file_type", o.type == kQ4KM ? 15 : file_type(mat));
  if (mat != TensorType::F32 && mat != TensorType::F16) w.add_u32("general.quantization_version", 2);
  w.add_u32(a + "context_length", uint32_t(o.n_ctx));
  w.add_u32(a + "embedding_length", uint32_t(o.n_embd));
  w.add_u32(a + "feed_forward_length", uint32_t(o.n_ff));
  w.add_u32(a + "block_count", uint32_t(o.n_layer));
  w.add_u32(a + "attention.head_count", uint32_t(o.n_head));
  w.add_u32(a + "attention.head_count_kv", uint32_t(o.n_head_kv));
  w.add_u32(a + "rope.dimension_count", uint32_t(o.n_embd / o.n_head));
  w.add_f32(a + "rope.freq_base", o.rope_base);
  w.add_f32(a + (family.layer_norm ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon"), 1e-5f);
  w.add_u32(a + "vocab_size", uint32_t(o.n_vocab));
  if (o.rope_scale > 1) {
    w.add_string(a + "rope.scaling.type", "linear");
    w.add_f32(a + "rope.scaling.factor", o.rope_scale);
  }
  if (family.sliding_period > 0)
    w.add_u32(a + "attention.sliding_window", uint32_t(o.sliding_window > 0 ? o.sliding_window : 40));
  if (family.shipped_attn_softcap > 0) {  // as the family's released models: both caps
    w.add_f32(a + "attn_logit_softcapping", o.attn_softcap > 0 ? o.attn_softcap : family.shipped_attn_softcap);
    w.add_f32(a + "final_logit_softcapping", o.final_softcap > 0 ? o.final_softcap : family.shipped_final_softcap);
  }
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_array("tokenizer.ggml.tokens", std::span<const std::string>(vocab.pieces));
  w.add_array("tokenizer.ggml.scores", std::span<const float>(vocab.scores));
  w.add_array("tokenizer.ggml.token_type", std::span<const int32_t>(vocab.types));
  w.add_u32("tokenizer.ggml.unknown_token_id", 0);
  w.add_u32("tokenizer.ggml.bos_token_id", 1);
  w.add_u32("tokenizer.ggml.eos_token_id", 2);
  w.add_bool("tokenizer.ggml.add_bos_token", true);
  w.add_bool("tokenizer.ggml.add_eos_token", false);
  if (!o.chat_template.empty()) {
    w.add_string("tokenizer.chat_template", kSynthChatmlTemplate);
    w.add_u32("tokenizer.ggml.eot_token_id", uint32_t(o.n_vocab - 1));  // <|im_end|>
  }

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
