// The GPU forward pass: the same recipe as the CPU, so the same bits.
//
// Build tests (always run): the build says whether it has CUDA, and asking
// for CUDA where there is none fails with a clear kvg::Error. GPU tests skip
// visibly, with the reason, when no usable device is present; on a GPU they
// check every kernel against its CPU definition bit for bit (all weight
// formats, widths that are not multiples of 16), whole models (logits
// SHA-256 equal to the CPU's, for every chunking), and that KV moves between
// CPU and GPU through grafts without changing a bit.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

#include "engine/cuda_forward.hpp"
#include "engine/generate.hpp"
#include "tests/stepped_generations.hpp"
#include "engine/graft.hpp"
#include "engine/graft_check.hpp"
#include "engine/sampler.hpp"
#include "engine/session.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/float16.hpp"
#include "kernels/cpu/kv_rounding.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/matmul_q8.hpp"
#include "kernels/cpu/ops.hpp"
#include "kernels/cpu/portable_math.hpp"
#include "kernels/cpu/rope_table.hpp"
#include "kernels/cuda/cuda_runtime_probe.hpp"
#include "tools/gguf_writer.hpp"
#include "tools/synth_model.hpp"
#ifdef KVG_CUDA_EMULATOR
#include <pthread.h>
#include <signal.h>

#include "kernels/cuda/emulator/include/mock_control.hpp"
#endif
#include "engine/memory_artifacts.hpp"
#include "kernels/cpu/dequantize.hpp"
#include "storage/artifact_format.hpp"
#include "storage/sha256.hpp"
#include "tests/data_paths.hpp"

#ifdef KVG_HAVE_CUDA
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/device_matrix.hpp"
#include "kernels/cuda/device_memory.hpp"
#include "kernels/cuda/kv_rounding.hpp"
#include "kernels/cuda/matmul.hpp"
#include "kernels/cuda/matmul_q8.hpp"
#include "kernels/cuda/ops.hpp"
#endif

// Skips the current test, with the reason, when no usable GPU is present.
#define KVG_REQUIRE_GPU()                                                        \
  do {                                                                           \
    std::string kvg_why_;                                                        \
    if (!::kvg::cuda_device_available(&kvg_why_)) GTEST_SKIP() << "no GPU: " << kvg_why_; \
  } while (0)

namespace kvg {
namespace {

// ---------------------------------------------------------------------------
// Process: CUDA must not be initialised before first use (PostgreSQL forks
// backends from a postmaster that has loaded the extension). Defined first so
// it also holds when the whole binary runs in one process: nothing before it
// has touched CUDA. The child, forked from a process whose static
// initialisation has run, must be able to use the GPU itself.

TEST(CudaProcess, ForkedChildCanInitialiseCuda) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0) << "fork failed";
  if (pid == 0) {  // real CUDA work, not just the probe's answer
    if (!cuda_device_available()) _exit(3);
#ifdef KVG_HAVE_CUDA
    try {
      cuda::Stream stream;
      cuda::DeviceBuffer buffer(4096);
      stream.synchronize();
    } catch (...) {
      _exit(1);
    }
#endif
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 3) GTEST_SKIP() << "no GPU in the forked child";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "CUDA was initialised before fork (at load or static initialisation)";
}

// ---------------------------------------------------------------------------
// Build: always run.

TEST(CudaBuild, ReportsWhetherKernelsWereCompiled) {
#ifdef KVG_HAVE_CUDA
  EXPECT_TRUE(cuda_compiled());
#else
  EXPECT_FALSE(cuda_compiled());
#endif
}

TEST(CudaBuild, AvailabilityComesWithAReason) {
  std::string why;
  const bool available = cuda_device_available(&why);
  EXPECT_FALSE(why.empty());
  if (!cuda_compiled()) {
    EXPECT_FALSE(available);
    EXPECT_NE(why.find("-DKVG_CUDA=ON"), std::string::npos) << why;
  }
  std::printf("cuda_device_available: %s — %s\n", available ? "yes" : "no", why.c_str());
}

std::vector<int32_t> prompt_for(const Model& model, size_t length, size_t step = 7919) {
  std::vector<int32_t> ids = {1};
  const int n_vocab = model.config().n_vocab;
  for (size_t i = 1; i < length; ++i) ids.push_back(int32_t(3 + (i * step) % size_t(n_vocab - 3)));
  return ids;
}

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
  // As tests/test_forward.cpp's families: windows whose edges fall inside
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

TEST(CudaBuild, ConstructingWithoutADeviceFailsClearly) {
  std::string why;
  if (cuda_device_available(&why)) GTEST_SKIP() << "a GPU is present (" << why << "): the failure path is unreachable";
  auto model = synth_model("f32");
  try {
    CudaForward gpu(model, 64);
    FAIL() << "CudaForward was constructed without a usable device";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    const std::string message = e.what();
    EXPECT_NE(message.find(cuda_compiled() ? why : std::string("-DKVG_CUDA=ON")), std::string::npos) << message;
  }
}

// ---------------------------------------------------------------------------
// Session wiring. EngineOptions::device (enum class Device { Cpu, Cuda, Auto })
// selects the forward pass; until Session has it, these tests skip.

template <class Options>
bool select_device(Options& options, const char* which) {
  if constexpr (requires { options.device; }) {
    using Device = decltype(options.device);
    options.device = std::string(which) == "cuda" ? Device::Cuda : Device::Auto;
    return true;
  } else {
    return false;
  }
}

#define KVG_REQUIRE_DEVICE_OPTION(options, which)                                         \
  do {                                                                                    \
    if (!select_device(options, which)) GTEST_SKIP() << "EngineOptions has no device field yet"; \
  } while (0)

TEST(CudaBuild, SessionOnCudaWithoutADeviceFailsClearly) {
  std::string why;
  if (cuda_device_available(&why)) GTEST_SKIP() << "a GPU is present: the failure path is unreachable";
  EngineOptions options;
  KVG_REQUIRE_DEVICE_OPTION(options, "cuda");
  auto model = synth_model("f32");
  try {
    Session session(model, options);
    std::vector<float> logits;
    const int32_t bos[1] = {1};
    session.forward(bos, LogitsFor::Last, &logits);
    FAIL() << "a CUDA session ran without a usable device";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported) << e.what();
  }
}

TEST(CudaBuild, AutoDeviceGivesTheCpuBits) {
  EngineOptions options;
  KVG_REQUIRE_DEVICE_OPTION(options, "auto");
  auto model = synth_model("f32");
  const auto tokens = prompt_for(*model, 40);
  std::vector<float> cpu, automatic;
  Session(model, EngineOptions{}).prefill(tokens, 0, LogitsFor::All, &cpu);
  Session(model, options).prefill(tokens, 0, LogitsFor::All, &automatic);
  EXPECT_EQ(logits_sha256(automatic), logits_sha256(cpu));
}

// ---------------------------------------------------------------------------
// Kernels against their CPU definitions (GPU only).

#ifdef KVG_HAVE_CUDA

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Deterministic noise: values in [-1, 1) with a sprinkling of zeros, -0 and
// tiny (subnormal) values, which exercise the edges of FMA and decoding.
struct Noise {
  uint64_t state;
  uint64_t next() { return mix64(state += 0x9e3779b97f4a7c15ull); }
  float value() {
    const uint64_t r = next();
    switch (r % 64) {
      case 0: return 0.0f;
      case 1: return -0.0f;
      case 2: return std::bit_cast<float>(uint32_t(r >> 40) & 0x7fffffu);  // subnormal
      default: return float(int32_t(r >> 40) * 2 - (1 << 24)) * 0x1p-24f;
    }
  }
  std::vector<float> values(size_t n, float scale = 1.0f) {
    std::vector<float> v(n);
    for (float& f : v) f = value() * scale;
    return v;
  }
  uint16_t finite_f16() {  // every finite f16, subnormals included
    uint16_t h;
    do h = uint16_t(next()); while ((h & 0x7c00u) == 0x7c00u);
    return h;
  }
};

// Random but valid bytes of a weight matrix in each format. Values are kept
// far from overflow: a NaN's bit pattern differs between x86 and NVIDIA
// (both are "the" default NaN of their hardware), so the recipe's bitwise
// promise is for finite results.
std::vector<uint8_t> random_weights(WeightType type, int64_t rows, int64_t cols, Noise& noise) {
  const size_t row_bytes = size_t(cols / weight_block_elements(type)) * size_t(weight_block_bytes(type));
  std::vector<uint8_t> bytes(size_t(rows) * row_bytes);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = bytes.data() + size_t(r) * row_bytes;
    switch (type) {
      case WeightType::F32:
        for (int64_t k = 0; k < cols; ++k) {
          const float v = noise.value();
          std::memcpy(row + 4 * k, &v, 4);
        }
        break;
      case WeightType::F16:
        for (int64_t k = 0; k < cols; ++k) {
          const uint16_t h = noise.finite_f16();
          std::memcpy(row + 2 * k, &h, 2);
        }
        break;
      case WeightType::BF16:
        for (int64_t k = 0; k < cols; ++k) {
          uint16_t h = f32_to_bf16(noise.value() * 4.0f);
          if (k % 13 == 5) h = uint16_t(noise.next() & 0x807fu);  // bf16 subnormals and signed zeros
          std::memcpy(row + 2 * k, &h, 2);
        }
        break;
      case WeightType::Q4_K:
      case WeightType::Q6_K: {  // any payload; sane f16 scales (d, dmin first for Q4_K, d last for Q6_K)
        const int block_bytes = weight_block_bytes(type);
        for (int64_t b = 0; b < cols / 256; ++b) {
          uint8_t* block = row + b * block_bytes;
          for (int i = 0; i < block_bytes; ++i) block[i] = uint8_t(noise.next());
          const uint16_t d = f32_to_f16(noise.value() * 0.01f), dmin = f32_to_f16(noise.value() * 0.01f);
          std::memcpy(type == WeightType::Q4_K ? block : block + 208, &d, 2);
          if (type == WeightType::Q4_K) std::memcpy(block + 2, &dmin, 2);
        }
        break;
      }
      case WeightType::Q4_1:
      case WeightType::Q5_0:
      case WeightType::Q5_1:
      case WeightType::Q2_K:
      case WeightType::Q3_K:
      case WeightType::Q5_K: {  // any payload; sane f16 scales at their offsets
        const int block_bytes = weight_block_bytes(type), block_elems = weight_block_elements(type);
        const int d_at = type == WeightType::Q2_K ? 80 : type == WeightType::Q3_K ? 108 : 0;
        const int m_at = type == WeightType::Q2_K ? 82 : (type == WeightType::Q5_0 || type == WeightType::Q3_K) ? -1 : 2;
        for (int64_t b = 0; b < cols / block_elems; ++b) {
          uint8_t* block = row + b * block_bytes;
          for (int i = 0; i < block_bytes; ++i) block[i] = uint8_t(noise.next());
          const uint16_t d = f32_to_f16(noise.value() * 0.01f), m = f32_to_f16(noise.value() * 0.01f);
          std::memcpy(block + d_at, &d, 2);
          if (m_at >= 0) std::memcpy(block + m_at, &m, 2);
        }
        break;
      }
      case WeightType::Q8_0:
      case WeightType::Q4_0: {
        const int block_bytes = weight_block_bytes(type);
        for (int64_t b = 0; b < cols / 32; ++b) {
          uint8_t* block = row + b * block_bytes;
          uint16_t d = noise.finite_f16();
          if (b % 5 == 1) d = uint16_t(noise.next() & 0x83ffu);  // subnormal or zero scales
          if ((d & 0x7c00u) > 0x5000u) d = uint16_t(d & 0x93ffu);  // keep |d| modest
          std::memcpy(block, &d, 2);
          for (int i = 2; i < block_bytes; ++i) block[i] = uint8_t(noise.next());  // int8 -128 included
        }
        break;
      }
    }
  }
  return bytes;
}

WeightMatrix host_matrix(WeightType type, const std::vector<uint8_t>& bytes, int64_t rows, int64_t cols) {
  WeightMatrix w;
  w.type = type;
  w.data = bytes.data();
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = bytes.size() / size_t(rows);
  return w;
}

cuda::DeviceBuffer to_device(const void* data, size_t bytes, const cuda::Stream& stream) {
  cuda::DeviceBuffer b(bytes);
  cuda::copy_to_device(b.data(), data, bytes, stream);
  return b;
}
template <class T>
cuda::DeviceBuffer to_device(const std::vector<T>& v, const cuda::Stream& stream) {
  return to_device(v.data(), v.size() * sizeof(T), stream);
}
template <class T>
std::vector<T> from_device(const cuda::DeviceBuffer& b, size_t n, const cuda::Stream& stream) {
  std::vector<T> v(n);
  cuda::copy_to_host(v.data(), b.data(), n * sizeof(T), stream);
  stream.synchronize();
  return v;
}

// Index of the first differing float (by bits), or -1.
int64_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return int64_t(i);
  return -1;
}

const WeightType kAllTypes[] = {WeightType::F32,  WeightType::F16,  WeightType::BF16, WeightType::Q8_0,
                                WeightType::Q4_0, WeightType::Q4_K, WeightType::Q6_K, WeightType::Q4_1,
                                WeightType::Q5_0, WeightType::Q5_1, WeightType::Q2_K, WeightType::Q3_K,
                                WeightType::Q5_K};

#endif  // KVG_HAVE_CUDA

TEST(CudaKernels, ExpMatchesCpuBitForBit) {
  KVG_REQUIRE_GPU();
#ifdef KVG_HAVE_CUDA
  std::vector<float> in = {0.0f, -0.0f, 1.0f, -1.0f, 88.0f, std::nextafter(88.0f, 100.0f), -86.0f,
                           std::nextafter(-86.0f, -100.0f), 87.9f, -85.9f, INFINITY, -INFINITY, NAN, -NAN,
                           std::bit_cast<float>(0x7fc12345u), std::bit_cast<float>(0x00000001u),
                           std::bit_cast<float>(0x80000001u), 1e-30f, -1e-30f, 0.6931472f, -0.6931472f};
  // A stride through every bit pattern: all exponents, both signs, NaNs.
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 251) in.push_back(std::bit_cast<float>(uint32_t(u)));
  // Dense around the cut-offs and the range that matters for softmax.
  for (float x = -90.0f; x < 90.0f; x += 0.00731f) in.push_back(x);
  cuda::Stream stream;
  const cuda::DeviceBuffer in_d = to_device(in, stream);
  cuda::DeviceBuffer out_d(in.size() * 4);
  cuda::exp_values(in_d.as<float>(), out_d.as<float>(), int64_t(in.size()), stream);
  const auto gpu = from_device<float>(out_d, in.size(), stream);
  std::vector<float> cpu(in.size());
  for (size_t i = 0; i < in.size(); ++i) cpu[i] = exp_f32(in[i]);
  const int64_t bad = first_difference(cpu, gpu);
  EXPECT_EQ(bad, -1) << "exp_f32(" << in[size_t(std::max<int64_t>(bad, 0))] << ") differs";
#endif
}

TEST(CudaKernels, MatmulMatchesCpuForEveryWeightTypeAndShape) {
  KVG_REQUIRE_GPU();
#ifdef KVG_HAVE_CUDA
  cuda::Stream stream;
  ThreadPool pool(1);
  Noise noise{7};
  int checked = 0;
  for (WeightType type : kAllTypes) {
    const int block = weight_block_elements(type);
    // Partial lane rounds, partial 256-element staging chunks, one element.
    const std::vector<int64_t> widths = block == 256  ? std::vector<int64_t>{256, 768}
                                        : block == 32 ? std::vector<int64_t>{32, 96, 288, 544}
                                                      : std::vector<int64_t>{1, 7, 24, 100, 264, 520};
    for (int64_t cols : widths)
      for (int64_t rows : {1, 5, 17, 40})
        for (int64_t n_tokens : {1, 3, 4, 5, 16, 37}) {
          const auto bytes = random_weights(type, rows, cols, noise);
          const WeightMatrix host = host_matrix(type, bytes, rows, cols);
          const int64_t x_stride = cols + 3, y_stride = rows + 2;
          const auto x = noise.values(size_t(n_tokens * x_stride));
          std::vector<float> cpu(size_t(n_tokens * y_stride), 0.0f);
          matmul(host, x.data(), x_stride, n_tokens, cpu.data(), y_stride, pool, Isa::Scalar);

          const cuda::DeviceMatrix w = cuda::upload_matrix(host, stream);
          const cuda::DeviceBuffer x_d = to_device(x, stream);
          cuda::DeviceBuffer y_d = to_device(std::vector<float>(cpu.size(), 0.0f), stream);
          const cuda::MatmulOutput out[1] = {{w.view, y_d.as<float>(), y_stride}};
          cuda::matmul(out, x_d.as<float>(), x_stride, n_tokens, stream);
          const auto gpu = from_device<float>(y_d, cpu.size(), stream);
          const int64_t bad = first_difference(cpu, gpu);
          ASSERT_EQ(bad, -1) << weight_type_name(type) << " rows " << rows << " cols " << cols << " tokens " << n_tokens
                             << ": element " << bad << " cpu " << cpu[size_t(std::max<int64_t>(bad, 0))] << " gpu "
                             << gpu[size_t(std::max<int64_t>(bad, 0))];
          ++checked;
        }
  }
  EXPECT_GT(checked, 600);
#endif
}

#ifdef KVG_HAVE_CUDA
// Three products of one input in one launch (cuda::matmul, or
// cuda::matmul_q8 under q8-portable-v1), each against its CPU definition.
void expect_one_launch_matches_cpu(const WeightType (&types)[3], const int64_t (&rows)[3], int64_t cols,
                                   std::initializer_list<int64_t> token_counts, uint64_t seed, bool q8) {
  cuda::Stream stream;
  ThreadPool pool(1);
  Noise noise{seed};
  for (int64_t n_tokens : token_counts) {
    const auto x = noise.values(size_t(n_tokens * cols));
    std::vector<std::vector<uint8_t>> bytes;
    std::vector<cuda::DeviceMatrix> ws;
    std::vector<cuda::DeviceBuffer> ys;
    std::vector<cuda::MatmulOutput> outs;
    for (int j = 0; j < 3; ++j) {
      bytes.push_back(random_weights(types[j], rows[j], cols, noise));
      ws.push_back(cuda::upload_matrix(host_matrix(types[j], bytes.back(), rows[j], cols), stream));
      ys.emplace_back(size_t(n_tokens * rows[j]) * 4);
    }
    for (int j = 0; j < 3; ++j) outs.push_back({ws[size_t(j)].view, ys[size_t(j)].as<float>(), rows[j]});
    const cuda::DeviceBuffer x_d = to_device(x, stream);
    cuda::DeviceBuffer scratch(q8 ? cuda::matmul_q8_scratch_bytes(cols, n_tokens) : 0);
    if (q8)
      cuda::matmul_q8(outs, x_d.as<float>(), cols, n_tokens, scratch.data(), scratch.bytes(), stream);
    else
      cuda::matmul(outs, x_d.as<float>(), cols, n_tokens, stream);
    for (int j = 0; j < 3; ++j) {
      std::vector<float> cpu(size_t(n_tokens * rows[j]));
      (q8 ? matmul_q8 : matmul)(host_matrix(types[j], bytes[size_t(j)], rows[j], cols), x.data(), cols, n_tokens,
                                cpu.data(), rows[j], pool, Isa::Scalar);
      EXPECT_EQ(first_difference(cpu, from_device<float>(ys[size_t(j)], cpu.size(), stream)), -1)
          << weight_type_name(types[j]) << " (output " << j << "), tokens " << n_tokens;
    }
  }
}
#endif

TEST(CudaKernels, OneLaunchOfSeveralMatricesMatchesCpu) {
  KVG_REQUIRE_GPU();
#ifdef KVG_HAVE_CUDA
  expect_one_launch_matches_cpu({WeightType::Q4_0, WeightType::F32, WeightType::BF16}, {33, 5, 70}, 96, {1, 2, 19}, 11,
                                false);
#endif
}

#ifdef KVG_HAVE_CUDA
const WeightType kQuantizedTypes[] = {WeightType::Q8_0, WeightType::Q4_0, WeightType::Q4_1, WeightType::Q5_0,
                                      WeightType::Q5_1, WeightType::Q2_K, WeightType::Q3_K, WeightType::Q4_K,
                                      WeightType::Q5_K, WeightType::Q6_K};

// cuda::matmul_q8 of one matrix, with its scratch, copied back.
std::vector<float> gpu_matmul_q8(const WeightMatrix& host, const std::vector<float>& x, int64_t x_stride,
                                 int64_t n_tokens, int64_t y_stride, const cuda::Stream& stream) {
  const cuda::DeviceMatrix w = cuda::upload_matrix(host, stream);
  const cuda::DeviceBuffer x_d = to_device(x, stream);
  cuda::DeviceBuffer y_d = to_device(std::vector<float>(size_t(n_tokens * y_stride), 0.0f), stream);
  cuda::DeviceBuffer scratch(cuda::matmul_q8_scratch_bytes(host.cols, n_tokens));
  const cuda::MatmulOutput out[1] = {{w.view, y_d.as<float>(), y_stride}};
  cuda::matmul_q8(out, x_d.as<float>(), x_stride, n_tokens, scratch.data(), scratch.bytes(), stream);
  return from_device<float>(y_d, size_t(n_tokens * y_stride), stream);
}
#endif

// q8-portable-v1: the device's activation quantization and integer dot
// products give the bits of the CPU's executable definition, for every
// quantized format, one and several rounds of blocks (a warp covers 32
// blocks of 32 or 4 of 256 per round), rows that leave warps of a block idle
// and token counts that leave lanes of a token tile idle.
TEST(CudaKernels, MatmulQ8MatchesCpuScalarForEveryFormatAndShape) {
  KVG_REQUIRE_GPU();
#ifdef KVG_HAVE_CUDA
  cuda::Stream stream;
  ThreadPool pool(1);
  Noise noise{23};
  int checked = 0;
  for (WeightType type : kQuantizedTypes) {
    const int block = weight_block_elements(type);
    const std::vector<int64_t> widths = block == 256 ? std::vector<int64_t>{256, 2304} : std::vector<int64_t>{96, 1056};
    for (int64_t cols : widths)
      for (int64_t rows : {1, 5, 17})
        for (int64_t n_tokens : {1, 3, 17}) {
          const auto bytes = random_weights(type, rows, cols, noise);
          const WeightMatrix host = host_matrix(type, bytes, rows, cols);
          const int64_t x_stride = cols + 3, y_stride = rows + 2;
          auto x = noise.values(size_t(n_tokens * x_stride), 3.0f);
          if (n_tokens > 1) std::fill_n(x.begin() + x_stride, block, 0.0f);  // a block of zeros: dx = 0
          if (n_tokens > 2)  // a block of subnormals and zeros: 127 / amax overflows to inf, 0 * inf is NaN
            for (int i = 0; i < block; ++i) x[size_t(2 * x_stride + i)] = i % 3 == 0 ? 0.0f : (i % 3 == 1 ? 1e-40f : -3e-41f);
          std::fill_n(x.begin(), 7, -0.0f);
          std::vector<float> cpu(size_t(n_tokens * y_stride), 0.0f);
          matmul_q8(host, x.data(), x_stride, n_tokens, cpu.data(), y_stride, pool, Isa::Scalar);
          const auto gpu = gpu_matmul_q8(host, x, x_stride, n_tokens, y_stride, stream);
          const int64_t bad = first_difference(cpu, gpu);
          ASSERT_EQ(bad, -1) << weight_type_name(type) << " rows " << rows << " cols " << cols << " tokens " << n_tokens
                             << ": element " << bad << " cpu " << cpu[size_t(std::max<int64_t>(bad, 0))] << " gpu "
                             << gpu[size_t(std::max<int64_t>(bad, 0))];
          ++checked;
        }
  }
  EXPECT_EQ(checked, 10 * 2 * 3 * 3);
#endif
}

// Matrices of both activation block sizes and an f32 one in one launch: each
// output gets its own recipe's bits (F32/F16/BF16 stay f32-portable-v1).
TEST(CudaKernels, MatmulQ8OfSeveralMatricesMatchesCpu) {
  KVG_REQUIRE_GPU();
#ifdef KVG_HAVE_CUDA
  expect_one_launch_matches_cpu({WeightType::Q4_0, WeightType::F16, WeightType::Q6_K}, {33, 5, 9}, 512, {1, 10}, 31,
                                true);
  cuda::Stream stream;
  Noise noise{37};
  // Too little scratch is refused by name, before anything runs.
  const auto bytes = random_weights(WeightType::Q8_0, 4, 64, noise);
  const cuda::DeviceMatrix w = cuda::upload_matrix(host_matrix(WeightType::Q8_0, bytes, 4, 64), stream);
  const cuda::DeviceBuffer x_d = to_device(noise.values(2 * 64), stream);
  cuda::DeviceBuffer y_d(2 * 4 * 4), small(cuda::matmul_q8_scratch_bytes(64, 2) - 1);
  const cuda::MatmulOutput out[1] = {{w.view, y_d.as<float>(), 4}};
  try {
    cuda::matmul_q8(out, x_d.as<float>(), 64, 2, small.data(), small.bytes(), stream);
    ADD_FAILURE() << "a scratch one byte short was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("scratch"), std::string::npos) << e.what();
  }
#endif
}

TEST(CudaKernels, EmbeddingRowsAreDequantizedExactly) {
  KVG_REQUIRE_GPU();
#ifdef KVG_HAVE_CUDA
  cuda::Stream stream;
  Noise noise{13};
  for (WeightType type : kAllTypes) {
    const int64_t rows = 50, cols = weight_block_elements(type) == 256 ? 512 : weight_block_elements(type) == 32 ? 160 : 72;
    const auto bytes = random_weights(type, rows, cols, noise);
    const WeightMatrix host = host_matrix(type, bytes, rows, cols);
    const std::vector<int32_t> tokens = {0, 49, 7, 7, 23};
    std::vector<float> cpu(tokens.size() * size_t(cols));
    for (size_t t = 0; t < tokens.size(); ++t) dequantize_row(host, tokens[t], cpu.data() + t * size_t(cols));
    const cuda::DeviceMatrix w = cuda::upload_matrix(host, stream);
    const cuda::DeviceBuffer tokens_d = to_device(tokens, stream);
    cuda::DeviceBuffer x_d(cpu.size() * 4);
    cuda::embed_rows(w.view, tokens_d.as<int32_t>(), int64_t(tokens.size()), x_d.as<float>(), stream);
    EXPECT_EQ(first_difference(cpu, from_device<float>(x_d, cpu.size(), stream)), -1) << weight_type_name(type);
  }
#endif
}

TEST(CudaKernels, RmsnormRopeSwigluAndAddMatchCpu) {
  KVG_REQUIRE_GPU();
#ifdef KVG_HAVE_CUDA
  cuda::Stream stream;
  Noise noise{17};
  for (int64_t n : {1, 7, 64, 100, 2051}) {  // RMSNorm over 3 rows
    const int64_t rows = 3;
    const auto x = noise.values(size_t(rows * n), 3.0f);
    const auto w = noise.values(size_t(n));
    std::vector<float> cpu(x.size());
    for (int64_t r = 0; r < rows; ++r) rmsnorm(&x[size_t(r * n)], w.data(), n, 1e-5f, &cpu[size_t(r * n)], Isa::Scalar);
    const auto x_d = to_device(x, stream), w_d = to_device(w, stream);
    cuda::DeviceBuffer y_d(x.size() * 4);
    cuda::rmsnorm(x_d.as<float>(), w_d.as<float>(), rows, n, 1e-5f, y_d.as<float>(), stream);
    EXPECT_EQ(first_difference(cpu, from_device<float>(y_d, x.size(), stream)), -1) << "rmsnorm n " << n;
  }
  for (RopeStyle style : {RopeStyle::AdjacentPairs, RopeStyle::SplitHalves})
    for (int rope_dim : {8, 12}) {  // partial and full rotation of head_dim 12
      const int n_heads = 3, head_dim = 12, half = rope_dim / 2;
      const int64_t n_tokens = 5, row_stride = n_heads * head_dim + 4, p0 = 1000;
      const RopeTable table(rope_dim, 10000.0);
      std::vector<float> cos(size_t(n_tokens * half)), sin(cos.size());
      for (int64_t t = 0; t < n_tokens; ++t) table.angles(p0 + t, &cos[size_t(t * half)], &sin[size_t(t * half)]);
      const auto x = noise.values(size_t(n_tokens * row_stride), 5.0f);
      std::vector<float> cpu = x;
      for (int64_t t = 0; t < n_tokens; ++t)
        apply_rope(&cpu[size_t(t * row_stride)], n_heads, head_dim, rope_dim, &cos[size_t(t * half)],
                   &sin[size_t(t * half)], style);
      cuda::DeviceBuffer x_d = to_device(x, stream);
      const auto cos_d = to_device(cos, stream), sin_d = to_device(sin, stream);
      cuda::apply_rope(x_d.as<float>(), n_tokens, row_stride, n_heads, head_dim, rope_dim, cos_d.as<float>(),
                       sin_d.as<float>(), style, stream);
      EXPECT_EQ(first_difference(cpu, from_device<float>(x_d, x.size(), stream)), -1) << "rope dim " << rope_dim;
    }
  {
    const int64_t n = 10007;
    auto gate = noise.values(size_t(n), 100.0f);  // reaches exp's cut-offs at -86 and 88
    const auto up = noise.values(size_t(n), 2.0f);
    std::vector<float> cpu(static_cast<size_t>(n));
    swiglu(gate.data(), up.data(), cpu.data(), n);
    cuda::DeviceBuffer gate_d = to_device(gate, stream);
    const auto up_d = to_device(up, stream);
    cuda::swiglu(gate_d.as<float>(), up_d.as<float>(), gate_d.as<float>(), n, stream);  // in place, as forward does
    EXPECT_EQ(first_difference(cpu, from_device<float>(gate_d, size_t(n), stream)), -1) << "swiglu";

    auto sum = gate;
    add_inplace(sum.data(), up.data(), n);
    cuda::DeviceBuffer sum_d = to_device(gate, stream);
    cuda::add_inplace(sum_d.as<float>(), up_d.as<float>(), n, stream);
    EXPECT_EQ(first_difference(sum, from_device<float>(sum_d, size_t(n), stream)), -1) << "add";
  }
#endif
}

// The compact KV storages' rounding of new rows in the strided mirror: the
// CPU's bits for rows of every scale (subnormal, zero, huge, non-finite),
// and nothing outside the rows touched.
TEST(CudaKernels, KvRoundingMatchesCpu) {
  KVG_REQUIRE_GPU();
#ifdef KVG_HAVE_CUDA
  cuda::Stream stream;
  Noise noise{29};
  for (KvRowRounding rounding : {KvRowRounding::Bf16, KvRowRounding::I8})
    for (int head_dim : {1, 8, 64}) {
      const int n_heads = 3;
      const int64_t n_tokens = 37, row_stride = int64_t(n_heads) * head_dim + 5;
      std::vector<float> x(size_t(n_tokens * row_stride));
      for (int64_t t = 0; t < n_tokens; ++t) {
        const float scale = std::ldexp(1.0f, int(t % 9) * 17 - 80);  // 2^-80 .. 2^56
        for (int64_t i = 0; i < row_stride; ++i) x[size_t(t * row_stride + i)] = noise.value() * scale;
      }
      x[size_t(3 * row_stride + 1)] = std::numeric_limits<float>::quiet_NaN();
      x[size_t(4 * row_stride)] = -std::numeric_limits<float>::infinity();
      std::vector<float> cpu = x;
      for (int64_t t = 0; t < n_tokens; ++t) round_kv_rows(rounding, &cpu[size_t(t * row_stride)], n_heads, head_dim);
      cuda::DeviceBuffer x_d = to_device(x, stream);
      cuda::round_kv_rows(rounding, x_d.as<float>(), n_tokens, row_stride, n_heads, head_dim, stream);
      EXPECT_EQ(first_difference(cpu, from_device<float>(x_d, x.size(), stream)), -1)
          << (rounding == KvRowRounding::I8 ? "i8" : "bf16") << " head_dim " << head_dim;
    }
#endif
}

// starcoder2's LayerNorm (rows of widths that are and are not multiples of
// the 16 lanes, offsets far from zero) and its ungated GELU.
TEST(CudaKernels, LayerNormAndGeluMatchCpu) {
  KVG_REQUIRE_GPU();
#ifdef KVG_HAVE_CUDA
  cuda::Stream stream;
  Noise noise{23};
  for (int64_t n : {1, 7, 72, 100, 2051}) {
    const int64_t rows = 3;
    auto x = noise.values(size_t(rows * n), 3.0f);
    for (size_t i = 0; i < x.size(); i += 2) x[i] += 40.0f;  // a mean far from zero
    const auto w = noise.values(size_t(n)), b = noise.values(size_t(n));
    std::vector<float> cpu(x.size());
    for (int64_t r = 0; r < rows; ++r)
      layernorm(&x[size_t(r * n)], w.data(), b.data(), n, 1e-5f, &cpu[size_t(r * n)], Isa::Scalar);
    const auto x_d = to_device(x, stream), w_d = to_device(w, stream), b_d = to_device(b, stream);
    cuda::DeviceBuffer y_d(x.size() * 4);
    cuda::layernorm(x_d.as<float>(), w_d.as<float>(), b_d.as<float>(), rows, n, 1e-5f, y_d.as<float>(), stream);
    EXPECT_EQ(first_difference(cpu, from_device<float>(y_d, x.size(), stream)), -1) << "layernorm n " << n;
  }
  auto x = noise.values(10007, 12.0f);  // both branches of tanh, and its saturation
  for (float v : {0.0f, -0.0f, 0.625f, -0.625f, 44.0f, -44.0f, 1e-20f}) x.push_back(v);
  std::vector<float> cpu = x;
  gelu_inplace(cpu.data(), int64_t(cpu.size()));
  cuda::DeviceBuffer x_d = to_device(x, stream);
  cuda::gelu_inplace(x_d.as<float>(), int64_t(x.size()), stream);
  EXPECT_EQ(first_difference(cpu, from_device<float>(x_d, x.size(), stream)), -1) << "gelu";
#endif
}

// The gemma family's element-wise ops and the per-head q/k norm.
TEST(CudaKernels, GegluSoftcapScaleAndHeadNormMatchCpu) {
  KVG_REQUIRE_GPU();
#ifdef KVG_HAVE_CUDA
  cuda::Stream stream;
  Noise noise{29};
  const int64_t n = 20011;
  auto gate = noise.values(size_t(n), 12.0f);  // both branches of tanh, and its saturation
  for (float x : {0.0f, -0.0f, 0.625f, -0.625f, std::nextafter(0.625f, 0.0f), 44.0f, -44.0f, 1e-20f, 1e30f})
    gate.push_back(x);  // finite inputs: NaN bit patterns are outside the recipe
  const int64_t m = int64_t(gate.size());
  const auto up = noise.values(size_t(m), 2.0f);
  std::vector<float> cpu(static_cast<size_t>(m));
  geglu(gate.data(), up.data(), cpu.data(), m);
  cuda::DeviceBuffer gate_d = to_device(gate, stream);
  const auto up_d = to_device(up, stream);
  cuda::geglu(gate_d.as<float>(), up_d.as<float>(), gate_d.as<float>(), m, stream);
  EXPECT_EQ(first_difference(cpu, from_device<float>(gate_d, size_t(m), stream)), -1) << "geglu";

  for (float cap : {30.0f, 1.5f}) {
    std::vector<float> capped = gate;
    softcap_inplace(capped.data(), cap, m);
    cuda::DeviceBuffer x_d = to_device(gate, stream);
    cuda::softcap_inplace(x_d.as<float>(), cap, m, stream);
    EXPECT_EQ(first_difference(capped, from_device<float>(x_d, size_t(m), stream)), -1) << "softcap " << cap;
  }
  std::vector<float> scaled = gate;
  scale_inplace(scaled.data(), std::sqrt(48.0f), m);
  cuda::DeviceBuffer s_d = to_device(gate, stream);
  cuda::scale_inplace(s_d.as<float>(), std::sqrt(48.0f), m, stream);
  EXPECT_EQ(first_difference(scaled, from_device<float>(s_d, size_t(m), stream)), -1) << "scale";

  // Heads of 12 in rows of stride 40 (3 heads and 4 floats of something else).
  const int n_heads = 3, head_dim = 12;
  const int64_t n_tokens = 4, stride = 40;
  const auto x = noise.values(size_t(n_tokens * stride), 4.0f);
  const auto w = noise.values(size_t(head_dim));
  std::vector<float> normed = x;
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int h = 0; h < n_heads; ++h) {
      float* head = &normed[size_t(t * stride + h * head_dim)];
      rmsnorm(head, w.data(), head_dim, 1e-6f, head, Isa::Scalar);
    }
  cuda::DeviceBuffer x_d = to_device(x, stream);
  const auto w_d = to_device(w, stream);
  cuda::rmsnorm_heads(x_d.as<float>(), n_tokens, stride, n_heads, head_dim, w_d.as<float>(), 1e-6f, stream);
  EXPECT_EQ(first_difference(normed, from_device<float>(x_d, x.size(), stream)), -1) << "head norms";
#endif
}

TEST(CudaKernels, AttentionMatchesCpuAcrossBlocksAndHeads) {
  KVG_REQUIRE_GPU();
#ifdef KVG_HAVE_CUDA
  cuda::Stream stream;
  Noise noise{19};
  struct Case { int n_head, n_head_kv, head_dim; int64_t p0, n_tokens; float q_scale; int64_t window = 0; float softcap = 0; };
  const Case cases[] = {{4, 2, 8, 0, 40, 1.0f},   {6, 2, 12, 31, 3, 1.0f},   {8, 8, 64, 95, 1, 1.0f},
                        {4, 1, 128, 0, 70, 1.0f}, {2, 2, 12, 10, 50, 60.0f},  // scores far apart: p = 0 cut-off
                        {2, 1, 512, 64, 2, 1.0f}, {3, 3, 200, 5, 33, 1.0f},
                        {4, 2, 64, 600, 2, 1.0f},  // 19 key blocks: rounds of 8 warps, the last one partial
                        {2, 2, 40, 250, 9, 4.0f},  // 8 and 9 key blocks: one round, then two
                        // Windows: edges inside the first key block, inside later ones, on a block
                        // boundary, a window of one key, one wider than the context; soft-capping.
                        {4, 2, 12, 0, 45, 1.0f, 12},   {4, 2, 12, 30, 40, 1.0f, 20}, {2, 1, 64, 90, 6, 1.0f, 32},
                        {2, 2, 8, 5, 3, 1.0f, 1},      {2, 2, 16, 0, 20, 1.0f, 500},
                        {4, 2, 12, 0, 45, 30.0f, 0, 50.0f}, {2, 2, 40, 250, 9, 4.0f, 40, 1.5f},
                        {4, 1, 128, 600, 2, 1.0f, 300, 30.0f}};
  for (const Case& c : cases) {
    const int64_t positions = c.p0 + c.n_tokens;
    const int64_t kv_width = int64_t(c.n_head_kv) * c.head_dim;
    const int64_t kv_stride = 3 * kv_width + 5;  // a mirror-like layout: other layers in between
    const int64_t q_stride = int64_t(c.n_head) * c.head_dim;
    const auto k = noise.values(size_t(positions * kv_stride)), v = noise.values(size_t(positions * kv_stride));
    const auto q = noise.values(size_t(c.n_tokens * q_stride), c.q_scale);
    const float scale = 1.0f / std::sqrt(float(c.head_dim));
    std::vector<float> cpu(q.size());
    for (int64_t t = 0; t < c.n_tokens; ++t)
      for (int h = 0; h < c.n_head; ++h) {
        const KvLayout layout{k.data(), v.data(), kv_stride, int64_t(h / (c.n_head / c.n_head_kv)) * c.head_dim};
        attention_head(&q[size_t(t * q_stride + h * c.head_dim)], layout, c.head_dim, c.p0 + t, scale,
                       &cpu[size_t(t * q_stride + h * c.head_dim)], Isa::Scalar, AttentionExtras{c.window, c.softcap});
      }
    const auto k_d = to_device(k, stream), v_d = to_device(v, stream), q_d = to_device(q, stream);
    cuda::DeviceBuffer out_d(q.size() * 4);
    cuda::attention(q_d.as<float>(), q_stride, k_d.as<float>(), v_d.as<float>(), kv_stride,
                    cuda::AttentionShape{c.n_head, c.n_head_kv, c.head_dim, scale, c.window, c.softcap}, c.p0, c.n_tokens,
                    out_d.as<float>(), q_stride, stream);
    EXPECT_EQ(first_difference(cpu, from_device<float>(out_d, q.size(), stream)), -1)
        << "heads " << c.n_head << "/" << c.n_head_kv << " head_dim " << c.head_dim << " p0 " << c.p0 << " window "
        << c.window << " softcap " << c.softcap;
  }
#endif
}

// ---------------------------------------------------------------------------
// Whole models on the GPU (GPU only).

struct Evaluation {
  std::vector<float> logits;
  std::unique_ptr<KvCache> cache;
};

EngineOptions under(const Recipe& recipe) {
  EngineOptions o;
  o.recipe = recipe;
  return o;
}

Evaluation cpu_run(std::shared_ptr<const Model> model, const std::vector<int32_t>& tokens, int64_t chunk,
                   const Recipe& recipe = kDefaultRecipe) {
  Session session(model, under(recipe));
  Evaluation r;
  session.prefill(tokens, chunk, LogitsFor::All, &r.logits);
  r.cache = std::make_unique<KvCache>(session.kv_cache());
  return r;
}

// CudaForward driven the way a Session drives it: chunk after chunk.
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

void expect_gpu_equals_cpu(std::shared_ptr<const Model> model, const std::vector<int32_t>& tokens, const std::string& label,
                           const Recipe& recipe = kDefaultRecipe) {
  const Evaluation cpu = cpu_run(model, tokens, 0, recipe);
  CudaForward gpu(model, model->config().n_ctx, recipe);
  for (int64_t chunk : {int64_t(1), int64_t(7), int64_t(0)}) {
    const Evaluation run = gpu_run(gpu, *model, tokens, chunk);
    ASSERT_EQ(run.logits.size(), cpu.logits.size());
    EXPECT_EQ(logits_sha256(run.logits), logits_sha256(cpu.logits)) << label << ", chunk " << chunk;
    EXPECT_TRUE(same_kv(*run.cache, *cpu.cache, int64_t(tokens.size()))) << label << ", chunk " << chunk << ": KV differs";
  }
}

class CudaOnSharedModel : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaOnSharedModel, LogitsHashAndKvEqualCpuForEveryChunking) {
  KVG_REQUIRE_GPU();
  KVG_REQUIRE_TEST_DATA(GetParam());
  auto model = Model::load(test::data_path(GetParam()));
  expect_gpu_equals_cpu(model, prompt_for(*model, 70), GetParam());
}

TEST_P(CudaOnSharedModel, GreedyDecodeEqualsCpu) {
  KVG_REQUIRE_GPU();
  KVG_REQUIRE_TEST_DATA(GetParam());
  auto model = Model::load(test::data_path(GetParam()));
  Session cpu(model, EngineOptions{});
  CudaForward gpu(model, cpu.max_context());
  KvCache cache(model->config().n_layer, model->config().kv_row_floats(), cpu.max_context());
  std::vector<float> cpu_logits, gpu_logits;
  std::vector<int32_t> tokens = {1};
  cpu.forward(tokens, LogitsFor::Last, &cpu_logits);
  gpu.forward(tokens, 0, LogitsFor::Last, &gpu_logits, cache);
  for (int step = 0; step < 40; ++step) {
    ASSERT_EQ(logits_sha256(gpu_logits), logits_sha256(cpu_logits)) << "step " << step;
    const int32_t next[1] = {argmax(cpu_logits)};
    gpu.forward(next, cpu.n_past(), LogitsFor::Last, &gpu_logits, cache);
    cpu.forward(next, LogitsFor::Last, &cpu_logits);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaOnSharedModel, ::testing::Values(test::kStories260K, test::kTinyStories656K),
                         [](const auto& info) {
                           return std::string(info.param).find("260K") != std::string::npos ? std::string("stories260K")
                                                                                            : std::string("TinyStories656K");
                         });

// A synthetic variant as a test name: "f16-qwen2" -> "f16_qwen2".
std::string variant_name(const ::testing::TestParamInfo<const char*>& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

class CudaOnSynthModel : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaOnSynthModel, LogitsHashAndKvEqualCpuForEveryChunking) {
  KVG_REQUIRE_GPU();
  auto model = synth_model(GetParam());
  expect_gpu_equals_cpu(model, prompt_for(*model, 45), GetParam());
}

INSTANTIATE_TEST_SUITE_P(WeightTypes, CudaOnSynthModel,
                         ::testing::Values("f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k", "q4_1", "q5_0",
                                           "q5_1", "q2_k", "q3_k", "q5_k", "f16-qwen2", "f32-llama3", "q8_0-phi3", "f32-qwen3",
                                           "f16-gemma", "f32-gemma2", "f16-gemma3", "f32-starcoder2"),
                         variant_name);

// q8-portable-v1 (kernels/cuda/matmul_q8): every block-quantized format,
// and an f32 model, whose products keep f32 arithmetic under it.
class CudaOnSynthModelQ8 : public ::testing::TestWithParam<const char*> {};

const Recipe kQ8Recipe{Arithmetic::Q8, KvStorage::F32};

TEST_P(CudaOnSynthModelQ8, LogitsHashAndKvEqualCpuForEveryChunking) {
  KVG_REQUIRE_GPU();
  auto model = synth_model(GetParam());
  try {
    Session probe(model, under(kQ8Recipe));
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Unsupported) throw;
    GTEST_SKIP() << "the CPU forward pass does not compute " << kQ8Recipe.name() << " yet: " << e.what();
  }
  expect_gpu_equals_cpu(model, prompt_for(*model, 45), std::string(GetParam()) + " under " + kQ8Recipe.name(),
                        kQ8Recipe);
}

// The recipe reaches the kernels: a quantized model's GPU logits under q8
// are not its f32 logits, an f32 model's are (no matrix of it is quantized).
TEST_P(CudaOnSynthModelQ8, TheRecipeChoosesTheArithmeticOfQuantizedMatricesOnly) {
  KVG_REQUIRE_GPU();
  auto model = synth_model(GetParam());
  const auto tokens = prompt_for(*model, 12);
  CudaForward f32(model, 64), q8(model, 64, kQ8Recipe);
  EXPECT_EQ(q8.recipe(), kQ8Recipe);
  const Evaluation a = gpu_run(f32, *model, tokens, 0), b = gpu_run(q8, *model, tokens, 0);
  if (std::string(GetParam()) == "f32")
    EXPECT_EQ(logits_sha256(a.logits), logits_sha256(b.logits));
  else
    EXPECT_NE(logits_sha256(a.logits), logits_sha256(b.logits));
}

INSTANTIATE_TEST_SUITE_P(WeightTypes, CudaOnSynthModelQ8,
                         ::testing::Values("f32", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k",
                                           "q5_k", "q6_k", "q8_0-phi3", "q8_0-gemma2", "q8_0-gemma3", "q8_0-starcoder2"),
                         variant_name);

// Compact KV storage for every family: the rounded rows the GPU mirror holds
// are the CPU cache's, and so are the logits (plain llama's:
// CudaSession.CompactKvIsTheCpusBitsAndGraftsAcrossDevices).
class CudaFamilyCompactKv : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaFamilyCompactKv, LogitsHashAndKvEqualCpuForEveryChunking) {
  KVG_REQUIRE_GPU();
  auto model = synth_model(GetParam());
  for (KvStorage storage : {KvStorage::BF16, KvStorage::I8}) {
    const Recipe recipe{Arithmetic::F32, storage};
    expect_gpu_equals_cpu(model, prompt_for(*model, 45), std::string(GetParam()) + " under " + recipe.name(), recipe);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, CudaFamilyCompactKv,
                         ::testing::Values("f16-qwen2", "f32-llama3", "q8_0-phi3", "f32-qwen3", "f16-gemma", "f32-gemma2",
                                           "f16-gemma3", "f32-starcoder2"),
                         variant_name);

// ---------------------------------------------------------------------------
// Grafts across devices (GPU only), driving CudaForward directly on the host
// cache of a CPU session, exactly as the Session wiring does.

class CudaGraft : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_device_available(&why)) GTEST_SKIP() << "no GPU: " << why;
    KVG_REQUIRE_TEST_DATA(GetParam());
    model_ = Model::load(test::data_path(GetParam()));
    tokens_ = prompt_for(*model_, 75, 104729);
  }
  std::shared_ptr<const Model> model_;
  std::vector<int32_t> tokens_;
  MemoryArtifacts store_;
};

TEST_P(CudaGraft, CpuArtifactGraftsExactlyOnGpuAndEqualsMonolithicGpu) {
  const size_t n_vocab = size_t(model_->config().n_vocab);
  CudaForward gpu(model_, model_->config().n_ctx);
  // Monolithic on the GPU.
  const Evaluation mono = gpu_run(gpu, *model_, tokens_, 0);
  for (int64_t split : {int64_t(1), int64_t(31), int64_t(32), int64_t(33), int64_t(74)}) {
    Session cpu(model_, EngineOptions{});
    cpu.prefill(std::span<const int32_t>(tokens_.data(), size_t(split)), 0, LogitsFor::None, nullptr);
    const Digest id = store_.capture_from(cpu, 0, split);

    Session grafted(model_, EngineOptions{});  // host cache receives the artifact
    gpu.truncate(0);  // this CudaForward now mirrors another cache: nothing on the device is valid for it
    ASSERT_EQ(graft(grafted, id, store_.opener(), tokens_).n_tokens, split);
    std::vector<float> logits;
    const auto rest = std::span<const int32_t>(tokens_).subspan(size_t(split));
    gpu.forward(rest, split, LogitsFor::All, &logits, grafted.kv_cache());  // uploads the grafted rows first
    EXPECT_EQ(gpu.device_positions(), int64_t(tokens_.size()));
    const std::vector<float> expected(mono.logits.begin() + std::ptrdiff_t(size_t(split) * n_vocab), mono.logits.end());
    EXPECT_EQ(logits_sha256(logits), logits_sha256(expected)) << "split " << split;
    EXPECT_TRUE(same_kv(grafted.kv_cache(), *mono.cache, int64_t(tokens_.size()))) << "split " << split;
  }
}

TEST_P(CudaGraft, GpuKvCapturesTheSameArtifactAndGraftsExactlyOnCpu) {
  const int64_t split = 40;
  const auto prefix = std::span<const int32_t>(tokens_.data(), size_t(split));
  Session cpu(model_, EngineOptions{});
  cpu.prefill(prefix, 0, LogitsFor::None, nullptr);
  const Digest cpu_id = store_.capture_from(cpu, 0, split);

  Session gpu_filled(model_, EngineOptions{});
  CudaForward gpu(model_, gpu_filled.max_context());
  gpu.forward(prefix, 0, LogitsFor::None, nullptr, gpu_filled.kv_cache());
  gpu_filled.append_grafted(prefix);  // the rows are there; declare them
  const Digest gpu_id = store_.capture_from(gpu_filled, 0, split);
  EXPECT_EQ(to_hex(gpu_id), to_hex(cpu_id)) << "the GPU's KV bytes differ from the CPU's";

  GraftCheckOptions options;
  options.samples = 4;
  const auto r = graft_check(model_, EngineOptions{}, gpu_id, store_.opener(), tokens_, options);
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(r.graft_logits_sha256, r.recompute_logits_sha256);
}

TEST_P(CudaGraft, TruncationInvalidatesDeviceRows) {
  // Evaluate a prompt, truncate, continue differently: the device must not
  // reuse the rows past the cut, and a graft into a fresh cache must be
  // uploaded rather than mistaken for the previous cache's rows.
  CudaForward gpu(model_, model_->config().n_ctx);
  KvCache cache(model_->config().n_layer, model_->config().kv_row_floats(), gpu.max_positions());
  std::vector<float> logits;
  gpu.forward(tokens_, 0, LogitsFor::None, nullptr, cache);
  gpu.truncate(20);
  EXPECT_EQ(gpu.device_positions(), 20);
  std::vector<int32_t> other(tokens_.begin(), tokens_.begin() + 20);
  for (int i = 0; i < 30; ++i) other.push_back(int32_t(5 + (i * 31) % 200));
  gpu.forward(std::span<const int32_t>(other).subspan(20), 20, LogitsFor::All, &logits, cache);
  const Evaluation cpu = cpu_run(model_, other, 0);
  const size_t n_vocab = size_t(model_->config().n_vocab);
  EXPECT_EQ(logits_sha256(logits),
            logits_sha256(std::vector<float>(cpu.logits.begin() + std::ptrdiff_t(20 * n_vocab), cpu.logits.end())));

  KvCache fresh(model_->config().n_layer, model_->config().kv_row_floats(), gpu.max_positions());
  std::vector<float> again;
  fresh.reserve(20);
  for (int64_t p = 0; p < 20; ++p)
    for (int l = 0; l < model_->config().n_layer; ++l) {
      std::memcpy(fresh.k(l, p), cpu.cache->k(l, p), size_t(model_->config().kv_row_floats()) * 4);
      std::memcpy(fresh.v(l, p), cpu.cache->v(l, p), size_t(model_->config().kv_row_floats()) * 4);
    }
  gpu.forward(std::span<const int32_t>(other).subspan(20), 20, LogitsFor::All, &again, fresh);
  EXPECT_EQ(logits_sha256(again), logits_sha256(logits));
}

INSTANTIATE_TEST_SUITE_P(Models, CudaGraft, ::testing::Values(test::kStories260K, test::kTinyStories656K),
                         [](const auto& info) {
                           return std::string(info.param).find("260K") != std::string::npos ? std::string("stories260K")
                                                                                            : std::string("TinyStories656K");
                         });

// ---------------------------------------------------------------------------
// Through the Session wiring (EngineOptions::device = Device::Cuda).

TEST(CudaSession, PrefillChunksAndGraftCheckAreExactOnCuda) {
  KVG_REQUIRE_GPU();
  KVG_REQUIRE_TEST_DATA(test::kTinyStories656K);
  EngineOptions on_gpu;
  KVG_REQUIRE_DEVICE_OPTION(on_gpu, "cuda");
  auto model = Model::load(test::data_path(test::kTinyStories656K));
  const auto tokens = prompt_for(*model, 75, 104729);
  std::vector<float> cpu_logits;
  Session(model, EngineOptions{}).prefill(tokens, 0, LogitsFor::All, &cpu_logits);
  for (int64_t chunk : {int64_t(1), int64_t(7), int64_t(0)}) {
    std::vector<float> logits;
    Session(model, on_gpu).prefill(tokens, chunk, LogitsFor::All, &logits);
    EXPECT_EQ(logits_sha256(logits), logits_sha256(cpu_logits)) << "chunk " << chunk;
  }
  MemoryArtifacts store;
  for (bool capture_on_gpu : {false, true}) {
    Session source(model, capture_on_gpu ? on_gpu : EngineOptions{});
    source.prefill(std::span<const int32_t>(tokens.data(), 33), 0, LogitsFor::None, nullptr);
    const Digest id = store.capture_from(source, 0, 33);
    GraftCheckOptions options;
    options.samples = 4;
    // Graft onto the other device than the capture's, and onto the same.
    for (const EngineOptions& target : {on_gpu, EngineOptions{}}) {
      const auto r = graft_check(model, target, id, store.opener(), tokens, options);
      EXPECT_TRUE(r.exact) << "captured on " << (capture_on_gpu ? "GPU" : "CPU");
      EXPECT_EQ(r.recompute_logits_sha256,
                logits_sha256(std::vector<float>(cpu_logits.begin() + std::ptrdiff_t(33 * model->config().n_vocab),
                                                 cpu_logits.end())));
    }
  }
}

// Under a compact KV storage the GPU rounds the new rows as the CPU does:
// the same logits and KV for every chunking, and artifacts that graft
// exactly across devices.
TEST(CudaSession, CompactKvIsTheCpusBitsAndGraftsAcrossDevices) {
  KVG_REQUIRE_GPU();
  KVG_REQUIRE_TEST_DATA(test::kTinyStories656K);
  auto model = Model::load(test::data_path(test::kTinyStories656K));
  const auto tokens = prompt_for(*model, 75, 104729);
  const ModelConfig& c = model->config();
  for (KvStorage storage : {KvStorage::BF16, KvStorage::I8}) {
    SCOPED_TRACE(kv_storage_name(storage));
    EngineOptions on_cpu, on_gpu;
    on_cpu.recipe.kv = on_gpu.recipe.kv = storage;
    KVG_REQUIRE_DEVICE_OPTION(on_gpu, "cuda");
    Session cpu(model, on_cpu);
    std::vector<float> cpu_logits;
    cpu.prefill(tokens, 0, LogitsFor::All, &cpu_logits);
    std::vector<float> f32_logits;
    Session(model, EngineOptions{}).prefill(tokens, 0, LogitsFor::All, &f32_logits);
    EXPECT_NE(logits_sha256(cpu_logits), logits_sha256(f32_logits)) << "the storage changed nothing";
    for (int64_t chunk : {int64_t(1), int64_t(7), int64_t(0)}) {
      Session gpu(model, on_gpu);
      std::vector<float> logits;
      gpu.prefill(tokens, chunk, LogitsFor::All, &logits);
      EXPECT_EQ(logits_sha256(logits), logits_sha256(cpu_logits)) << "chunk " << chunk;
      const size_t floats = tokens.size() * size_t(c.kv_row_floats());
      for (int l = 0; l < c.n_layer; ++l) {
        EXPECT_EQ(0, std::memcmp(gpu.kv_cache().k(l, 0), cpu.kv_cache().k(l, 0), floats * 4)) << "layer " << l;
        EXPECT_EQ(0, std::memcmp(gpu.kv_cache().v(l, 0), cpu.kv_cache().v(l, 0), floats * 4)) << "layer " << l;
      }
    }
    MemoryArtifacts store;
    for (bool capture_on_gpu : {false, true}) {
      Session source(model, capture_on_gpu ? on_gpu : on_cpu);
      source.prefill(std::span<const int32_t>(tokens.data(), 33), 0, LogitsFor::None, nullptr);
      const Digest id = store.capture_from(source, 0, 33);
      GraftCheckOptions options;
      options.samples = 2;
      for (const EngineOptions& target : {on_gpu, on_cpu}) {
        const auto r = graft_check(model, target, id, store.opener(), tokens, options);
        EXPECT_TRUE(r.exact) << "captured on " << (capture_on_gpu ? "GPU" : "CPU");
      }
    }
  }
}

// ---------------------------------------------------------------------------
// A database server: a backend builds a Session per SQL call on the model it
// keeps loaded. The weights must stay on the device (one upload per Model),
// the workspace must be reused, and a failed GPU must cost speed, not calls.

TEST(CudaServer, SessionsOfOneModelUploadItsWeightsOnce) {
  KVG_REQUIRE_GPU();
  const auto tokens = [] { return prompt_for(*synth_model("f32"), 12); }();
#ifdef KVG_CUDA_EMULATOR
  const int64_t live_at_start = cuda::mock::counters().live_device_bytes;
#endif
  {
    auto model = synth_model("f32");
    std::vector<float> cpu;
    Session(model, EngineOptions{}).prefill(tokens, 0, LogitsFor::Last, &cpu);
    EngineOptions on_gpu;
    on_gpu.device = Device::Cuda;
    const int64_t uploads_before = CudaForward::weight_uploads();
#ifdef KVG_CUDA_EMULATOR
    cuda::mock::Counters after_first;
#endif
    const int calls = 20;  // as many "SQL calls", each with its own Session
    for (int call = 0; call < calls; ++call) {
      Session session(model, on_gpu);
      std::vector<float> logits;
      session.prefill(tokens, 0, LogitsFor::Last, &logits);
      EXPECT_EQ(logits_sha256(logits), logits_sha256(cpu)) << "call " << call;
#ifdef KVG_CUDA_EMULATOR
      if (call == 0) after_first = cuda::mock::counters();
#endif
    }
    EXPECT_EQ(CudaForward::weight_uploads() - uploads_before, 1);
    // scripts/gpu-check.sh prints this line from a real GPU's run.
    std::printf("weight uploads across %d sessions on one model in this process: %lld\n", calls,
                static_cast<long long>(CudaForward::weight_uploads() - uploads_before));
#ifdef KVG_CUDA_EMULATOR
    // Calls 2..20 reuse the first one's stream, KV mirror, scratch, rotary
    // table and pinned staging: they allocate nothing and upload only their
    // token ids.
    const cuda::mock::Counters after_all = cuda::mock::counters();
    EXPECT_EQ(after_all.device_allocations, after_first.device_allocations);
    EXPECT_EQ(after_all.pinned_allocations, after_first.pinned_allocations);
    EXPECT_EQ(after_all.streams_created, after_first.streams_created);
    EXPECT_EQ(after_all.h2d_bytes - after_first.h2d_bytes, int64_t((calls - 1) * tokens.size() * sizeof(int32_t)));
    EXPECT_GE(after_first.h2d_bytes, int64_t(model->weight_bytes()));
#endif
    // Another Model object (kvg.model changed, or the file did) is another upload.
    auto reloaded = synth_model("f32");
    std::vector<float> logits;
    Session(reloaded, on_gpu).prefill(tokens, 0, LogitsFor::Last, &logits);
    EXPECT_EQ(logits_sha256(logits), logits_sha256(cpu));
    EXPECT_EQ(CudaForward::weight_uploads() - uploads_before, 2);
  }
#ifdef KVG_CUDA_EMULATOR
  // Both models gone: their weights and idle workspaces went with them.
  EXPECT_EQ(cuda::mock::counters().live_device_bytes, live_at_start);
#endif
}

// The engine worker's path on a GPU (engine/generate.hpp: step_together):
// generations of one model on CUDA sessions join, wait and finish at their
// own steps, share the one weight upload, and each decodes the tokens
// generate() gives it alone on the CPU, under both recipes.
TEST(CudaServer, GenerationsSteppedTogetherEqualEachAloneOnTheCpu) {
  KVG_REQUIRE_GPU();
  for (const char* variant : {"f32", "q8_0"}) {
    const auto model = synth_model(variant);
    EngineOptions cpu, gpu;
    if (std::string(variant) == "q8_0") cpu.recipe = gpu.recipe = kQ8Recipe;
    gpu.device = Device::Cuda;
    std::vector<test::SteppedJob> jobs;
    for (int i = 0; i < 3; ++i) {
      test::SteppedJob job{prompt_for(*model, size_t(5 + 4 * i), size_t(7919 + 31 * i)), {}, i};
      job.options.max_new_tokens = 4 + i;
      job.options.stop_at_eos = false;
      job.options.prefill_chunk = i == 1 ? 3 : 0;
      if (i == 2) job.options.sampling.temperature = 0.8f, job.options.sampling.seed = 17;
      jobs.push_back(std::move(job));
    }
    const int64_t uploads_before = CudaForward::weight_uploads();
    std::vector<std::unique_ptr<Session>> sessions;
    for (size_t i = 0; i < jobs.size(); ++i) sessions.push_back(std::make_unique<Session>(model, gpu));
    // Job 0 sits out every third step: a client not reading.
    const auto tokens =
        test::step_jobs_together(sessions, jobs, [](size_t job, int step) { return !(job == 0 && step % 3 == 2); });
    EXPECT_EQ(CudaForward::weight_uploads() - uploads_before, 1) << variant;
    for (size_t i = 0; i < jobs.size(); ++i) {
      Session alone(model, cpu);
      EXPECT_EQ(tokens[i], generate(alone, jobs[i].prompt, jobs[i].options).tokens)
          << variant << " job " << i;
    }
  }
}

// Pinned staging is bounded (CudaForward's staging_bytes): a graft's upload,
// the new KV rows and all-rows logits larger than the buffer travel through
// it in chunks and arrive bit for bit.
TEST(CudaServer, TransfersLargerThanTheStagingBufferCopyExactly) {
  KVG_REQUIRE_GPU();
  auto model = synth_model("f32");  // a new Model: a fresh workspace, no staging yet
  const ModelConfig& c = model->config();
  const auto tokens = prompt_for(*model, 40);
  Session cpu(model, EngineOptions{});
  std::vector<float> expected;
  cpu.prefill(tokens, 0, LogitsFor::All, &expected);

  const size_t position_bytes = size_t(c.n_layer) * 2 * size_t(c.kv_row_floats()) * sizeof(float);
  const size_t logits_row_bytes = size_t(c.n_vocab) * sizeof(float);
  const size_t staging = 3 * position_bytes + 5;  // three KV positions per trip
#ifdef KVG_CUDA_EMULATOR
  cuda::mock::reset_largest_pinned();
#endif
  CudaForward gpu(model, 64, kDefaultRecipe, staging);
  // Rows [0, 20) on the host only, as after a graft: 20 positions to upload.
  KvCache host(c.n_layer, c.kv_row_floats(), 64);
  host.reserve(40);
  const size_t row_bytes = size_t(c.kv_row_floats()) * sizeof(float);
  for (int64_t p = 0; p < 20; ++p)
    for (int l = 0; l < c.n_layer; ++l) {
      std::memcpy(host.k(l, p), cpu.kv_cache().k(l, p), row_bytes);
      std::memcpy(host.v(l, p), cpu.kv_cache().v(l, p), row_bytes);
    }
  std::vector<float> logits;
  gpu.forward(std::span<const int32_t>(tokens.data() + 20, 20), 20, LogitsFor::All, &logits, host);
  ASSERT_EQ(logits.size(), 20 * size_t(c.n_vocab));
  EXPECT_EQ(logits_sha256(logits),
            logits_sha256(std::vector<float>(expected.begin() + std::ptrdiff_t(20 * c.n_vocab), expected.end())));
  for (int64_t p = 0; p < 40; ++p)
    for (int l = 0; l < c.n_layer; ++l) {
      EXPECT_EQ(std::memcmp(host.k(l, p), cpu.kv_cache().k(l, p), row_bytes), 0) << "K, position " << p;
      EXPECT_EQ(std::memcmp(host.v(l, p), cpu.kv_cache().v(l, p), row_bytes), 0) << "V, position " << p;
    }
  EXPECT_EQ(gpu.device_positions(), 40);
  // One more step on top (the fast path: it fits) still equals the CPU.
  const int32_t next[1] = {tokens[5]};
  std::vector<float> cpu_next, gpu_next;
  cpu.forward(next, LogitsFor::Last, &cpu_next);
  gpu.forward(next, 40, LogitsFor::Last, &gpu_next, host);
  EXPECT_EQ(logits_sha256(gpu_next), logits_sha256(cpu_next));
#ifdef KVG_CUDA_EMULATOR
  // No staging buffer grew past the bound (or past one unit, when a single
  // logits row is larger than it).
  EXPECT_LE(size_t(cuda::mock::counters().largest_pinned_bytes), std::max(staging, logits_row_bytes));
#else
  (void)logits_row_bytes;
#endif
}

#if defined(KVG_HAVE_CUDA) && !defined(KVG_CUDA_EMULATOR)
// A backend waiting for its forward pass must not spin a core that other
// backends need (the probe sets the flag before the context exists).
TEST(CudaServer, WaitingForTheGpuSleepsInsteadOfSpinning) {
  KVG_REQUIRE_GPU();
  EXPECT_TRUE(cuda::blocking_sync());
}
#endif

#ifdef KVG_CUDA_EMULATOR

// Failures injected into the emulator's runtime (emulator/mock_runtime.cpp).
class CudaFailure : public ::testing::Test {
 protected:
  void TearDown() override {
    cuda::mock::clear_failures();
    detail::cuda_forget_unusable_for_tests();
    last_device_fallback();
  }
  static EngineOptions on(Device device) {
    EngineOptions o;
    o.device = device;
    return o;
  }
};

TEST_F(CudaFailure, AutoRunsOnTheCpuWhenTheWeightsDoNotFit) {
  auto model = synth_model("f32");  // a new Model: its weights are not on the device yet
  const auto tokens = prompt_for(*model, 9);
  std::vector<float> cpu, automatic;
  Session(model, EngineOptions{}).prefill(tokens, 0, LogitsFor::All, &cpu);

  cuda::mock::fail(cuda::mock::Op::DeviceAlloc, cuda::mock::kMemoryAllocation, 3);
  Session session(model, on(Device::Auto));
  EXPECT_EQ(session.runs_on(), Device::Cpu);
  EXPECT_NE(session.device_fallback().find("cudaMalloc"), std::string::npos) << session.device_fallback();
  EXPECT_EQ(last_device_fallback(), session.device_fallback());
  session.prefill(tokens, 0, LogitsFor::All, &automatic);
  EXPECT_EQ(logits_sha256(automatic), logits_sha256(cpu));
  // Out of memory is not sticky: the device stays in use for later sessions.
  EXPECT_TRUE(cuda_device_available());
  EXPECT_EQ(Session(model, on(Device::Auto)).runs_on(), Device::Cuda);

  // Asked for explicitly, the GPU's failure is the call's.
  auto another = synth_model("f32");
  cuda::mock::fail(cuda::mock::Op::DeviceAlloc, cuda::mock::kMemoryAllocation, 0);
  try {
    Session refused(another, on(Device::Cuda));
    FAIL() << "a cuda session was built although its weights did not fit";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::OutOfRange) << e.what();
  }
}

TEST_F(CudaFailure, AutoRunsOnTheCpuWhenTheKvMirrorDoesNotFit) {
  auto model = synth_model("f32");
  const auto tokens = prompt_for(*model, 11);
  std::vector<float> cpu;
  Session(model, EngineOptions{}).prefill(tokens, 0, LogitsFor::All, &cpu);
  for (Device device : {Device::Auto, Device::Cuda}) {
    Session session(model, on(device));
    ASSERT_EQ(session.runs_on(), Device::Cuda);
    // The first forward allocates the KV mirror (the first device allocation
    // left: the weights are resident and the workspace starts empty or reused
    // after a failure freed it).
    cuda::mock::fail(cuda::mock::Op::DeviceAlloc, cuda::mock::kMemoryAllocation, 0);
    std::vector<float> logits;
    if (device == Device::Cuda) {
      try {
        session.prefill(tokens, 0, LogitsFor::All, &logits);
        FAIL() << "the forward pass ran although its KV mirror did not fit";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::OutOfRange) << e.what();
      }
      EXPECT_EQ(session.n_past(), 0);
      continue;
    }
    session.prefill(tokens, 0, LogitsFor::All, &logits);
    EXPECT_EQ(session.runs_on(), Device::Cpu);
    EXPECT_NE(session.device_fallback().find("out of memory"), std::string::npos) << session.device_fallback();
    EXPECT_EQ(logits_sha256(logits), logits_sha256(cpu));
  }
}

TEST_F(CudaFailure, AStickyErrorRetiresTheDeviceForTheProcess) {
  auto model = synth_model("f32");
  const auto tokens = prompt_for(*model, 12);
  const ModelConfig& c = model->config();
  KvCache host(c.n_layer, c.kv_row_floats(), 64);
  CudaForward gpu(model, 64);
  std::vector<float> logits;
  gpu.forward(std::span<const int32_t>(tokens.data(), 8), 0, LogitsFor::Last, &logits, host);
  ASSERT_EQ(gpu.device_positions(), 8);

  // A kernel fault surfaces at the copy back; the forward pass must wait for
  // what it queued before throwing (one synchronisation: nothing else in this
  // call synchronises before the copy) and keep its valid range.
  cuda::mock::fail(cuda::mock::Op::CopyToHost, cuda::mock::kIllegalAddress);
  const int64_t syncs = cuda::mock::counters().synchronizations;
  try {
    gpu.forward(std::span<const int32_t>(tokens.data() + 8, 4), 8, LogitsFor::Last, &logits, host);
    FAIL() << "the injected fault was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Internal) << e.what();
  }
  EXPECT_EQ(cuda::mock::counters().synchronizations - syncs, 1);
  EXPECT_EQ(gpu.device_positions(), 8);

  std::string why;
  EXPECT_FALSE(cuda_device_available(&why));
  EXPECT_NE(why.find("failed earlier in this process"), std::string::npos) << why;
  EXPECT_NE(why.find("status 700"), std::string::npos) << why;
  EXPECT_EQ(resolve_device(Device::Auto).runs_on, Device::Cpu);
  try {
    Session refused(model, on(Device::Cuda));
    FAIL() << "a cuda session was built on a retired device";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("failed earlier"), std::string::npos) << e.what();
  }
  std::vector<float> cpu, automatic;
  Session(model, EngineOptions{}).prefill(tokens, 0, LogitsFor::All, &cpu);
  Session fallback(model, on(Device::Auto));
  EXPECT_EQ(fallback.runs_on(), Device::Cpu);
  fallback.prefill(tokens, 0, LogitsFor::All, &automatic);
  EXPECT_EQ(logits_sha256(automatic), logits_sha256(cpu));
}

TEST_F(CudaFailure, AFailedUploadDoesNotAdvanceTheMirror) {
  auto model = synth_model("f32");
  const auto tokens = prompt_for(*model, 12);
  Session cpu(model, EngineOptions{});
  std::vector<float> expected;
  cpu.prefill(tokens, 0, LogitsFor::Last, &expected);
  CudaForward gpu(model, 64);
  // Rows [0, 8) are on the host only (as after a graft): the next forward
  // uploads them, computes, and fails copying back (out of memory: not
  // sticky). The upload was queued, but the range grows only after the final
  // synchronisation, so none of it counts.
  KvCache& host = cpu.kv_cache();
  cuda::mock::fail(cuda::mock::Op::CopyToHost, cuda::mock::kMemoryAllocation);
  std::vector<float> logits;
  EXPECT_THROW(gpu.forward(std::span<const int32_t>(tokens.data() + 8, 4), 8, LogitsFor::Last, &logits, host), Error);
  EXPECT_EQ(gpu.device_positions(), 0);
  // Retried, it uploads them again and gives the CPU's bits.
  gpu.forward(std::span<const int32_t>(tokens.data() + 8, 4), 8, LogitsFor::Last, &logits, host);
  EXPECT_EQ(gpu.device_positions(), 12);
  EXPECT_EQ(logits_sha256(logits), logits_sha256(expected));
}

TEST_F(CudaFailure, StreamsAreCreatedWithEverySignalBlocked) {
  sigset_t before, after;
  pthread_sigmask(SIG_BLOCK, nullptr, &before);
  const int64_t streams = cuda::mock::counters().streams_created;
  auto model = synth_model("f32");  // new Model: weights stream and a new workspace stream
  Session session(model, on(Device::Cuda));
  EXPECT_GT(cuda::mock::counters().streams_created, streams);
  EXPECT_EQ(cuda::mock::counters().signals_unblocked_at_stream_creation, 0);
  pthread_sigmask(SIG_BLOCK, nullptr, &after);
  for (int sig : {SIGINT, SIGTERM, SIGALRM, SIGUSR1})
    EXPECT_EQ(sigismember(&after, sig), sigismember(&before, sig)) << "signal " << sig;
}

#endif  // KVG_CUDA_EMULATOR

// ---------------------------------------------------------------------------
// Benchmark (scripts/gpu-check.sh): prefill and decode throughput on CPU and
// GPU and graft-versus-recompute time, on the model named by
// $KVG_BENCH_MODEL. Disabled by default; run with
// --gtest_also_run_disabled_tests --gtest_filter='CudaBench.*'.

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(CudaBench, DISABLED_CpuVersusGpu) {
  KVG_REQUIRE_GPU();
  const char* path = std::getenv("KVG_BENCH_MODEL");
  if (!path || !*path) GTEST_SKIP() << "set KVG_BENCH_MODEL to a GGUF model";
  const int64_t n_prompt = std::getenv("KVG_BENCH_PROMPT") ? std::atoll(std::getenv("KVG_BENCH_PROMPT")) : 256;
  const int64_t n_cpu_decode = 16, n_gpu_decode = 128, n_graft = n_prompt - 32;
  using clock = std::chrono::steady_clock;
  auto model = Model::load(path);
  const ModelConfig& c = model->config();
  std::vector<int32_t> prompt(static_cast<size_t>(n_prompt));
  for (int64_t i = 0; i < n_prompt; ++i) prompt[size_t(i)] = int32_t(uniform_for_position(7, i) * float(c.n_vocab - 3)) + 3;
  EngineOptions cpu_options;
  cpu_options.threads = int(std::max(1u, std::thread::hardware_concurrency()));
  const int64_t context = std::min<int64_t>(c.n_ctx, 2048);
  cpu_options.max_context = context;

  // CPU: prefill, decode, then graft + evaluate the tail.
  Session cpu(model, cpu_options);
  std::vector<float> cpu_last, logits;
  auto t0 = clock::now();
  cpu.prefill(prompt, 0, LogitsFor::Last, &cpu_last);
  const double cpu_prefill = seconds_since(t0);
  MemoryArtifacts store;
  const Digest id = store.capture_from(cpu, 0, n_graft);
  logits = cpu_last;
  t0 = clock::now();
  for (int64_t i = 0; i < n_cpu_decode; ++i) {
    const int32_t next[1] = {argmax(logits)};
    cpu.forward(next, LogitsFor::Last, &logits);
  }
  const double cpu_decode = seconds_since(t0);
  t0 = clock::now();
  Session cpu_grafted(model, cpu_options);
  graft(cpu_grafted, id, store.opener(), prompt);
  cpu_grafted.prefill(std::span<const int32_t>(prompt).subspan(size_t(n_graft)), 0, LogitsFor::Last, &logits);
  const double cpu_graft = seconds_since(t0);
  const bool cpu_graft_exact = logits_sha256(logits) == logits_sha256(cpu_last);

  // GPU: weights upload (once per model), prefill, decode, graft + tail.
  t0 = clock::now();
  CudaForward gpu(model, context);
  const double upload = seconds_since(t0);
  {  // warm-up: first launches load the kernels
    KvCache warm(c.n_layer, c.kv_row_floats(), context);
    gpu.forward(std::span<const int32_t>(prompt).first(16), 0, LogitsFor::Last, &logits, warm);
  }
  KvCache cache(c.n_layer, c.kv_row_floats(), context);
  std::vector<float> gpu_last;
  t0 = clock::now();
  gpu.forward(prompt, 0, LogitsFor::Last, &gpu_last, cache);
  const double gpu_prefill = seconds_since(t0);
  logits = gpu_last;
  t0 = clock::now();
  for (int64_t i = 0; i < n_gpu_decode; ++i) {
    const int32_t next[1] = {argmax(logits)};
    gpu.forward(next, n_prompt + i, LogitsFor::Last, &logits, cache);
  }
  const double gpu_decode = seconds_since(t0);
  t0 = clock::now();
  Session gpu_grafted(model, cpu_options);  // its host cache receives the artifact; the GPU mirrors it
  graft(gpu_grafted, id, store.opener(), prompt);
  gpu.truncate(0);  // now mirroring gpu_grafted's cache: its grafted rows are uploaded
  gpu.forward(std::span<const int32_t>(prompt).subspan(size_t(n_graft)), n_graft, LogitsFor::Last, &logits,
              gpu_grafted.kv_cache());
  const double gpu_graft = seconds_since(t0);
  const bool gpu_graft_exact = logits_sha256(logits) == logits_sha256(gpu_last);
  const bool same = logits_sha256(gpu_last) == logits_sha256(cpu_last);

  std::printf("\nmodel   %s (%llu parameters, %.2f GB of weights)\n", path, (unsigned long long)model->parameter_count(),
              double(model->weight_bytes()) / 1e9);
  std::printf("gpu     %s; weights uploaded in %.2f s\n", gpu.device_name().c_str(), upload);
  std::printf("cpu     %d threads, isa %s\n\n", cpu_options.threads, isa_name(cpu_options.isa));
  std::printf("| measure                                   | CPU          | GPU          |\n");
  std::printf("|-------------------------------------------|-------------:|-------------:|\n");
  std::printf("| prefill %4lld tokens, tokens/s             | %12.1f | %12.1f |\n", (long long)n_prompt,
              double(n_prompt) / cpu_prefill, double(n_prompt) / gpu_prefill);
  std::printf("| decode (greedy), tokens/s                 | %12.2f | %12.1f |\n", double(n_cpu_decode) / cpu_decode,
              double(n_gpu_decode) / gpu_decode);
  std::printf("| recompute %4lld tokens, s                  | %12.3f | %12.3f |\n", (long long)n_prompt, cpu_prefill,
              gpu_prefill);
  std::printf("| graft %4lld + evaluate %3lld, s              | %12.3f | %12.3f |\n", (long long)n_graft,
              (long long)(n_prompt - n_graft), cpu_graft, gpu_graft);
  std::printf("| graft logits == recompute logits          | %12s | %12s |\n", cpu_graft_exact ? "yes" : "NO",
              gpu_graft_exact ? "yes" : "NO");
  std::printf("| last-token logits SHA-256, GPU == CPU     | %27s |\n", same ? "yes" : "NO");
  EXPECT_TRUE(same);
  EXPECT_TRUE(cpu_graft_exact);
  EXPECT_TRUE(gpu_graft_exact);
}

// Decode speed on the GPU at long contexts (scripts/gpu-check.sh): for each
// context in KVG_BENCH_CONTEXTS (default "1024 8192 32768") the GPU prefills
// that many tokens, 2048 per forward, then decodes 32 greedy tokens. One
// machine-readable line per context, for the check's table.
TEST(CudaBench, DISABLED_DecodeAtLongContext) {
  KVG_REQUIRE_GPU();
  const char* path = std::getenv("KVG_BENCH_MODEL");
  if (!path || !*path) GTEST_SKIP() << "set KVG_BENCH_MODEL to a GGUF model";
  std::vector<int64_t> contexts;
  {
    const char* list = std::getenv("KVG_BENCH_CONTEXTS");
    std::string text = list && *list ? list : "1024 8192 32768";
    for (size_t at = 0; at < text.size();) {
      const size_t end = std::min(text.find(' ', at), text.size());
      if (end > at) contexts.push_back(std::atoll(text.substr(at, end - at).c_str()));
      at = end + 1;
    }
  }
  const int64_t n_decode = 32, chunk = 2048;
  auto model = Model::load(path);
  const ModelConfig& c = model->config();
  for (const int64_t context : contexts) {
    if (context <= 0 || context + n_decode > c.n_ctx) {
      std::printf("bench decode_context=%lld skipped: the model's n_ctx is %lld\n", (long long)context,
                  (long long)c.n_ctx);
      continue;
    }
    std::vector<int32_t> prompt(static_cast<size_t>(context));
    for (int64_t i = 0; i < context; ++i)
      prompt[size_t(i)] = int32_t(uniform_for_position(11, i) * float(c.n_vocab - 3)) + 3;
    CudaForward gpu(model, context + n_decode);
    KvCache cache(c.n_layer, c.kv_row_floats(), context + n_decode);
    std::vector<float> logits;
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t start = 0; start < context; start += chunk) {
      const int64_t n = std::min(chunk, context - start);
      gpu.forward(std::span<const int32_t>(prompt).subspan(size_t(start), size_t(n)), start, LogitsFor::Last, &logits,
                  cache);
    }
    const double prefill = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < n_decode; ++i) {
      const int32_t next[1] = {argmax(logits)};
      gpu.forward(next, context + i, LogitsFor::Last, &logits, cache);
    }
    const double decode = seconds_since(t0);
    std::printf("bench decode_context=%lld prefill_tok_s=%.1f decode_tok_s=%.2f\n", (long long)context,
                double(context) / prefill, double(n_decode) / decode);
  }
}

}  // namespace
}  // namespace kvg
