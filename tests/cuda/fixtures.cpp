// The shared fixtures of the CUDA executor's tests (tests/cuda/fixtures.hpp).
#include "tests/cuda/fixtures.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <span>

#include "kernels/cpu/float16.hpp"
#include "tools/gguf_writer.hpp"
#include "tools/synth_model.hpp"

namespace kvg::cuda_test {
namespace {

// "f32", "q4_k", ... and "f16-qwen2" (q/k/v biases, NeoX rotary).
SynthOptions small_synth(const std::string& variant) {
  SynthOptions o;
  const size_t dash = variant.find('-');
  o.type = variant.substr(0, dash);
  if (dash != std::string::npos) o.architecture = variant.substr(dash + 1);
  if (o.architecture == "llama3") {  // Llama 3.1+ rope scaling: rope_freqs.weight
    o.architecture = "llama";
    o.llama3_rope = true;
  }
  const bool blocks32 = o.type == "q8_0" || o.type == "q4_0" || o.type == "q4_1" || o.type == "q5_0" ||
                        o.type == "q5_1";
  const bool blocks256 = o.type == "q4_k" || o.type == "q6_k" || o.type == "q2_k" || o.type == "q3_k" ||
                         o.type == "q5_k";
  // Widths that are not multiples of 16 wherever the format allows it
  // (quantized rows hold whole blocks): head_dim 12, KV width 24 or 48,
  // n_ff 200, and a vocabulary of 300 rows for the output head.
  o.n_embd = blocks256 ? 256 : blocks32 ? 96 : 72;
  o.n_layer = 2;
  o.n_head = blocks256 ? 8 : blocks32 ? 8 : 6;
  o.n_head_kv = blocks256 ? 2 : blocks32 ? 4 : 2;
  o.n_ff = blocks256 ? 512 : blocks32 ? 160 : 200;
  o.n_vocab = 300;
  o.n_ctx = 256;
  o.seed = 42;
  // As tests/engine/test_forward.cpp's families: windows whose edges fall inside
  // the first and the second key block (the prompts are 45 tokens), caps
  // small enough that tanh bends synthetic scores and logits, and gemma3's
  // five sliding layers with their own rope base next to a global one with
  // its base and linear scaling.
  if (o.architecture == "phi3") o.sliding_window = 12;
  if (o.architecture == "gemma2") {
    o.sliding_window = 20;
    o.attn_softcap = 1.5f;
    o.final_softcap = 2.0f;
  }
  if (o.architecture == "gemma3") {
    o.n_layer = 6;
    o.rope_base = 1000000;
    o.rope_scale = 8;
  }
  return o;
}

// write_synth_model() writes f32, f16 and q8_0. bf16, q4_0, q4_k and q6_k
// models are the same seeded weights, encoded here (simply: the decoders,
// not the encoders, are under test).
void encode_row(gguf::TensorType type, const float* x, size_t n, uint8_t* out) {
  if (type == gguf::TensorType::F32) {
    std::memcpy(out, x, n * 4);
  } else if (type == gguf::TensorType::BF16) {
    for (size_t i = 0; i < n; ++i) {
      const uint16_t h = f32_to_bf16(x[i]);
      std::memcpy(out + 2 * i, &h, 2);
    }
  } else if (type == gguf::TensorType::Q4_0) {  // d = max|x| / 7 as f16, q = round(x / d) + 8 in [0, 15]
    for (size_t b = 0; b < n / 32; ++b, x += 32, out += 18) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
      const uint16_t dh = f32_to_f16(amax / 7.0f);
      const float d = f16_to_f32(dh);
      std::memcpy(out, &dh, 2);
      auto q = [&](int i) { return d == 0 ? 8 : int(std::clamp(std::round(x[i] / d) + 8.0f, 0.0f, 15.0f)); };
      for (int i = 0; i < 16; ++i) out[2 + i] = uint8_t(q(i) | (q(i + 16) << 4));
    }
  } else if (type == gguf::TensorType::Q4_K) {  // every (scale, min) = (63, 63): w = 63d*q - 63dmin
    for (size_t b = 0; b < n / 256; ++b, x += 256, out += 144) {
      float amax = 0;
      for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(x[i]));
      const uint16_t dh = f32_to_f16(2.0f * amax / (63.0f * 15.0f)), mh = f32_to_f16(amax / 63.0f);
      const float d = f16_to_f32(dh) * 63.0f, dmin = f16_to_f32(mh) * 63.0f;
      std::memcpy(out, &dh, 2);
      std::memcpy(out + 2, &mh, 2);
      std::memset(out + 4, 0xff, 12 + 128);
      for (int e = 0; e < 256; ++e) {
        const int q = d == 0 ? 0 : int(std::clamp(std::round((x[e] + dmin) / d), 0.0f, 15.0f));
        uint8_t& byte = out[16 + (e / 64) * 32 + (e % 32)];
        byte = (e % 64) >= 32 ? uint8_t((byte & 0x0f) | (q << 4)) : uint8_t((byte & 0xf0) | q);
      }
    }
  } else if (type == gguf::TensorType::Q6_K) {  // every sub-block scale 127: w = 127d*(q-32)
    for (size_t b = 0; b < n / 256; ++b, x += 256, out += 210) {
      float amax = 0;
      for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(x[i]));
      const uint16_t dh = f32_to_f16(amax / (127.0f * 31.0f));
      const float d = f16_to_f32(dh) * 127.0f;
      std::memset(out, 0, 192);
      std::memset(out + 192, 127, 16);
      std::memcpy(out + 208, &dh, 2);
      for (int e = 0; e < 256; ++e) {
        const int q = d == 0 ? 32 : int(std::clamp(std::round(x[e] / d) + 32.0f, 0.0f, 63.0f));
        const int half = e / 128, quarter = (e % 128) / 32, l = e % 32;
        uint8_t& low = out[half * 64 + (quarter & 1) * 32 + l];
        low = quarter < 2 ? uint8_t((low & 0xf0) | (q & 15)) : uint8_t((low & 0x0f) | ((q & 15) << 4));
        out[128 + half * 32 + l] |= uint8_t((q >> 4) << (2 * quarter));
      }
    }
  } else {
    FAIL() << "unexpected type";
  }
}

void write_synth_as(const SynthOptions& options, gguf::TensorType matrix_type, const std::string& path) {
  SynthOptions f32 = options;
  f32.type = "f32";
  const std::vector<SynthTensor> tensors = synth_tensors(f32);
  gguf::Writer w;
  add_synth_metadata(w, f32, "kvg-synth test " + std::string(gguf::tensor_type_name(matrix_type)));
  for (size_t i = 0; i < tensors.size(); ++i) {
    const SynthTensor& t = tensors[i];
    const gguf::TensorType type = t.ne.size() == 1 ? gguf::TensorType::F32 : matrix_type;  // norms, biases
    const uint64_t cols = t.ne[0], rows = t.ne.size() > 1 ? t.ne[1] : 1;
    const uint64_t row_bytes = gguf::Writer::tensor_bytes(std::vector<uint64_t>{cols}, type);
    std::vector<uint8_t> data(rows * row_bytes);
    std::vector<float> row(cols);
    for (uint64_t r = 0; r < rows; ++r) {
      for (uint64_t k = 0; k < cols; ++k) row[k] = synth_weight(options.seed, i, t, r * cols + k);
      encode_row(type, row.data(), cols, data.data() + r * row_bytes);
    }
    w.add_tensor(t.name, t.ne, type, std::move(data));
  }
  w.write(path);
}

}  // namespace

std::vector<int32_t> prompt_for(const Model& model, size_t length, size_t step) {
  std::vector<int32_t> ids = {1};
  const int n_vocab = model.config().n_vocab;
  for (size_t i = 1; i < length; ++i) ids.push_back(int32_t(3 + (i * step) % size_t(n_vocab - 3)));
  return ids;
}

std::shared_ptr<const Model> synth_model(const std::string& variant) {
  SynthOptions o = small_synth(variant);
  const std::string path = test::temp_dir("cuda-synth-" + variant) + "/model.gguf";
  const std::map<std::string, gguf::TensorType> encoded = {{"bf16", gguf::TensorType::BF16},
                                                           {"q4_0", gguf::TensorType::Q4_0},
                                                           {"q4_k", gguf::TensorType::Q4_K},
                                                           {"q6_k", gguf::TensorType::Q6_K}};
  if (auto it = encoded.find(o.type); it != encoded.end())
    write_synth_as(o, it->second, path);
  else
    write_synth_model(o, path);
  return Model::load(path);
}

EngineOptions under(const Recipe& recipe) {
  EngineOptions o;
  o.recipe = recipe;
  return o;
}

Evaluation cpu_run(std::shared_ptr<const Model> model, const std::vector<int32_t>& tokens, int64_t chunk,
                   const Recipe& recipe) {
  Session session(model, under(recipe));
  Evaluation r;
  session.prefill(tokens, chunk, LogitsFor::All, &r.logits);
  r.cache = std::make_unique<KvCache>(session.kv_cache());
  return r;
}

Evaluation gpu_run(CudaForward& gpu, const Model& model, const std::vector<int32_t>& tokens, int64_t chunk) {
  const ModelConfig& c = model.config();
  Evaluation r;
  r.cache = std::make_unique<KvCache>(c.n_layer, c.kv_row_floats(), gpu.max_positions());
  if (chunk <= 0) chunk = int64_t(tokens.size());
  std::vector<float> part;
  for (int64_t start = 0; start < int64_t(tokens.size()); start += chunk) {
    const int64_t end = std::min<int64_t>(int64_t(tokens.size()), start + chunk);
    gpu.forward(std::span<const int32_t>(tokens).subspan(size_t(start), size_t(end - start)), start, LogitsFor::All,
                &part, *r.cache);
    r.logits.insert(r.logits.end(), part.begin(), part.end());
  }
  return r;
}

bool same_kv(const KvCache& a, const KvCache& b, int64_t positions) {
  for (int l = 0; l < a.n_layer(); ++l)
    if (std::memcmp(a.k(l, 0), b.k(l, 0), size_t(positions * a.row_floats()) * 4) != 0 ||
        std::memcmp(a.v(l, 0), b.v(l, 0), size_t(positions * a.row_floats()) * 4) != 0)
      return false;
  return true;
}

}  // namespace kvg::cuda_test
