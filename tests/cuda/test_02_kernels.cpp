// CUDA kernels against their CPU definitions, bit for bit (GPU only).
#include "tests/cuda/fixtures.hpp"

#include <bit>
#include <cmath>
#include <cstring>

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/dequantize.hpp"
#include "kernels/cpu/float16.hpp"
#include "kernels/cpu/kv_rounding.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/matmul_q8.hpp"
#include "kernels/cpu/ops.hpp"
#include "kernels/cpu/portable_math.hpp"
#include "kernels/cpu/rope_table.hpp"
#ifdef KVG_HAVE_CUDA
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/device_matrix.hpp"
#include "kernels/cuda/device_memory.hpp"
#include "kernels/cuda/kv_rounding.hpp"
#include "kernels/cuda/matmul.hpp"
#include "kernels/cuda/matmul_q8.hpp"
#include "kernels/cuda/ops.hpp"
#endif

namespace kvg {
namespace {

using namespace cuda_test;

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
  // So is scratch that is not 256-byte aligned (the kernel loads the
  // quantized activations 16 bytes at a time), though large enough.
  cuda::DeviceBuffer offset(cuda::matmul_q8_scratch_bytes(64, 2) + 256);
  try {
    cuda::matmul_q8(out, x_d.as<float>(), 64, 2, static_cast<uint8_t*>(offset.data()) + 16, offset.bytes() - 16,
                    stream);
    ADD_FAILURE() << "scratch 16 bytes past an allocation was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("aligned"), std::string::npos) << e.what();
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

}  // namespace
}  // namespace kvg
