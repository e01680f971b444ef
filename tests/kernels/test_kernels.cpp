// Kernel-level checks of the recipe: every ISA computes the scalar
// definition's bits for every weight format, shape and thread count; the
// portable math is accurate and never calls libm in the numeric path.
#include <gtest/gtest.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/dequantize.hpp"
#include "kernels/cpu/float16.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/ops.hpp"
#include "kernels/cpu/portable_math.hpp"
#include "kernels/cpu/rope_table.hpp"
#include "tests/support/kernel_fixtures.hpp"

namespace kvg {
namespace {

using test::random_weights;
using test::supported_isas;

TEST(Matmul, EveryIsaMatchesScalarForEveryFormatShapeAndThreadCount) {
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  struct Shape { int64_t rows, cols, tokens; };
  for (WeightType type : {WeightType::F32, WeightType::F16, WeightType::BF16, WeightType::Q8_0, WeightType::Q4_0,
                          WeightType::Q4_K, WeightType::Q6_K, WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1,
                          WeightType::Q2_K, WeightType::Q3_K, WeightType::Q5_K}) {
    const int64_t block = weight_block_elements(type);
    auto width = [&](int64_t plain, int64_t blocks) { return block == 1 ? plain : block * blocks; };
    for (Shape s : {Shape{37, width(172, 3), 1}, Shape{64, width(8, 2), 5}, Shape{19, width(333, 5), 13}}) {
      const auto data = random_weights(type, s.rows, s.cols, rng);
      WeightMatrix w{type, data.data(), s.rows, s.cols, data.size() / size_t(s.rows)};
      std::vector<float> x(static_cast<size_t>(s.tokens * s.cols));
      for (auto& v : x) v = value(rng);
      std::vector<float> expected(static_cast<size_t>(s.tokens * s.rows));
      ThreadPool one(1);
      matmul(w, x.data(), s.cols, s.tokens, expected.data(), s.rows, one, Isa::Scalar);
      // The scalar kernel itself equals the documented per-element definition.
      for (int64_t t = 0; t < s.tokens; ++t)
        for (int64_t r = 0; r < s.rows; ++r) {
          std::vector<float> row(static_cast<size_t>(s.cols));
          dequantize_row(w, r, row.data());
          float lanes[16] = {};
          for (int64_t k = 0; k < s.cols; ++k) lanes[k % 16] = std::fma(x[size_t(t * s.cols + k)], row[size_t(k)], lanes[k % 16]);
          for (int i = 0; i < 8; ++i) lanes[i] = lanes[i] + lanes[i + 8];
          for (int i = 0; i < 4; ++i) lanes[i] = lanes[i] + lanes[i + 4];
          for (int i = 0; i < 2; ++i) lanes[i] = lanes[i] + lanes[i + 2];
          const float definition = lanes[0] + lanes[1];
          ASSERT_EQ(std::memcmp(&definition, &expected[size_t(t * s.rows + r)], 4), 0);
        }
      for (Isa isa : supported_isas())
        for (int threads : {1, 2, 3}) {
          ThreadPool pool(threads);
          std::vector<float> y(expected.size(), -1.0f);
          matmul(w, x.data(), s.cols, s.tokens, y.data(), s.rows, pool, isa);
          ASSERT_EQ(std::memcmp(y.data(), expected.data(), y.size() * 4), 0)
              << weight_type_name(type) << " " << s.rows << "x" << s.cols << " tokens " << s.tokens << " isa "
              << isa_name(isa) << " threads " << threads;
        }
    }
  }
}

// The K-quant element mapping, written the way the formats are usually
// described (whole blocks, 64 or 128 elements at a time), against the
// chunked decoder the kernels use.
TEST(Matmul, KQuantBlocksDecodeAsSpecified) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  for (WeightType type : {WeightType::Q4_K, WeightType::Q6_K}) {
    std::vector<uint8_t> block(size_t(weight_block_bytes(type)));
    for (auto& b : block) b = uint8_t(byte(rng));
    const uint16_t d = f32_to_f16(0.0123f), dmin = f32_to_f16(0.0071f);
    std::vector<float> expected(256);
    if (type == WeightType::Q4_K) {
      std::memcpy(block.data(), &d, 2);
      std::memcpy(block.data() + 2, &dmin, 2);
      const uint8_t* sc = block.data() + 4;
      auto scale_min = [&](int j, int& s, int& m) {
        if (j < 4) { s = sc[j] & 63; m = sc[j + 4] & 63; }
        else { s = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4); m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4); }
      };
      const uint8_t* q = block.data() + 16;
      for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
        int s1, m1, s2, m2;
        scale_min(is, s1, m1);
        scale_min(is + 1, s2, m2);
        const float d1 = f16_to_f32(d) * float(s1), o1 = f16_to_f32(dmin) * float(m1);
        const float d2 = f16_to_f32(d) * float(s2), o2 = f16_to_f32(dmin) * float(m2);
        for (int l = 0; l < 32; ++l) expected[size_t(j + l)] = d1 * float(q[l] & 0xF) - o1;
        for (int l = 0; l < 32; ++l) expected[size_t(j + 32 + l)] = d2 * float(q[l] >> 4) - o2;
      }
    } else {
      std::memcpy(block.data() + 208, &d, 2);
      const uint8_t* ql = block.data();
      const uint8_t* qh = block.data() + 128;
      const int8_t* sc = reinterpret_cast<const int8_t*>(block.data() + 192);
      const float df = f16_to_f32(d);
      for (int n = 0; n < 256; n += 128, ql += 64, qh += 32, sc += 8)
        for (int l = 0; l < 32; ++l) {
          const int is = l / 16;
          const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
          const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
          const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
          const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
          expected[size_t(n + l)] = df * float(sc[is]) * float(q1);
          expected[size_t(n + l + 32)] = df * float(sc[is + 2]) * float(q2);
          expected[size_t(n + l + 64)] = df * float(sc[is + 4]) * float(q3);
          expected[size_t(n + l + 96)] = df * float(sc[is + 6]) * float(q4);
        }
    }
    const WeightMatrix w{type, block.data(), 1, 256, block.size()};
    std::vector<float> got(256);
    dequantize_row(w, 0, got.data());
    for (int i = 0; i < 256; ++i) ASSERT_EQ(got[size_t(i)], expected[size_t(i)]) << weight_type_name(type) << " element " << i;
  }
}

// Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q5_K written as llama.cpp's reference
// dequantizers loop over a whole block (ggml-quants.c), against the chunked
// decoder the kernels use: same bits for random payloads.
std::vector<float> reference_block(WeightType type, const uint8_t* x) {
  std::vector<float> y(size_t(weight_block_elements(type)));
  auto h = [&](int at) { uint16_t v; std::memcpy(&v, x + at, 2); return f16_to_f32(v); };
  float* out = y.data();
  switch (type) {
    case WeightType::Q4_1: {
      const float d = h(0), m = h(2);
      for (int j = 0; j < 16; ++j) {
        out[j] = float(x[4 + j] & 0x0F) * d + m;
        out[j + 16] = float(x[4 + j] >> 4) * d + m;
      }
      break;
    }
    case WeightType::Q5_0:
    case WeightType::Q5_1: {
      const bool q51 = type == WeightType::Q5_1;
      const float d = h(0), m = q51 ? h(2) : 0.0f;
      uint32_t qh;
      std::memcpy(&qh, x + (q51 ? 4 : 2), 4);
      const uint8_t* qs = x + (q51 ? 8 : 6);
      for (int j = 0; j < 16; ++j) {
        const uint8_t xh_0 = uint8_t(((qh >> (j + 0)) << 4) & 0x10);
        const uint8_t xh_1 = uint8_t(((qh >> (j + 12))) & 0x10);
        if (q51) {
          out[j] = float((qs[j] & 0x0F) | xh_0) * d + m;
          out[j + 16] = float((qs[j] >> 4) | xh_1) * d + m;
        } else {
          out[j] = float(((qs[j] & 0x0F) | xh_0) - 16) * d;
          out[j + 16] = float(((qs[j] >> 4) | xh_1) - 16) * d;
        }
      }
      break;
    }
    case WeightType::Q2_K: {
      const float d = h(80), mn = h(82);
      const uint8_t* q = x + 16;
      int is = 0;
      for (int n = 0; n < 256; n += 128) {
        int shift = 0;
        for (int j = 0; j < 4; ++j) {
          uint8_t sc = x[is++];
          float dl = d * float(sc & 0xF), ml = mn * float(sc >> 4);
          for (int l = 0; l < 16; ++l) *out++ = dl * float((q[l] >> shift) & 3) - ml;
          sc = x[is++];
          dl = d * float(sc & 0xF), ml = mn * float(sc >> 4);
          for (int l = 0; l < 16; ++l) *out++ = dl * float((q[l + 16] >> shift) & 3) - ml;
          shift += 2;
        }
        q += 32;
      }
      break;
    }
    case WeightType::Q3_K: {
      const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
      uint32_t aux[4];
      std::memcpy(aux, x + 96, 12);
      const uint32_t tmp = aux[2];
      aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
      aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
      aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
      aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
      const int8_t* scales = reinterpret_cast<const int8_t*>(aux);
      const float d_all = h(108);
      const uint8_t* q = x + 32;
      const uint8_t* hm = x;
      uint8_t m = 1;
      int is = 0;
      for (int n = 0; n < 256; n += 128) {
        int shift = 0;
        for (int j = 0; j < 4; ++j) {
          float dl = d_all * float(scales[is++] - 32);
          for (int l = 0; l < 16; ++l) *out++ = dl * float(int8_t((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
          dl = d_all * float(scales[is++] - 32);
          for (int l = 0; l < 16; ++l)
            *out++ = dl * float(int8_t((q[l + 16] >> shift) & 3) - ((hm[l + 16] & m) ? 0 : 4));
          shift += 2;
          m = uint8_t(m << 1);
        }
        q += 32;
      }
      break;
    }
    case WeightType::Q5_K: {
      const float d = h(0), mn = h(2);
      const uint8_t* sc = x + 4;
      auto scale_min = [&](int j, int& s, int& m) {
        if (j < 4) { s = sc[j] & 63; m = sc[j + 4] & 63; }
        else { s = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4); m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4); }
      };
      const uint8_t* ql = x + 48;
      const uint8_t* qh = x + 16;
      int is = 0;
      uint8_t u1 = 1, u2 = 2;
      for (int j = 0; j < 256; j += 64) {
        int s, m;
        scale_min(is + 0, s, m);
        const float d1 = d * float(s), m1 = mn * float(m);
        scale_min(is + 1, s, m);
        const float d2 = d * float(s), m2 = mn * float(m);
        for (int l = 0; l < 32; ++l) *out++ = d1 * float((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
        for (int l = 0; l < 32; ++l) *out++ = d2 * float((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        ql += 32;
        is += 2;
        u1 = uint8_t(u1 << 2);
        u2 = uint8_t(u2 << 2);
      }
      break;
    }
    default: ADD_FAILURE() << "no reference for " << weight_type_name(type);
  }
  return y;
}

TEST(Matmul, LegacyAndKQuantsDecodeAsLlamaCppReference) {
  std::mt19937 rng(11);
  for (WeightType type : {WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1, WeightType::Q2_K, WeightType::Q3_K,
                          WeightType::Q5_K}) {
    for (int trial = 0; trial < 50; ++trial) {
      const int64_t cols = weight_block_elements(type) * 3;
      const auto data = random_weights(type, 1, cols, rng);
      const WeightMatrix w{type, data.data(), 1, cols, data.size()};
      std::vector<float> got(static_cast<size_t>(cols));
      dequantize_row(w, 0, got.data());
      for (int64_t b = 0; b < 3; ++b) {
        const std::vector<float> expected =
            reference_block(type, data.data() + size_t(b) * size_t(weight_block_bytes(type)));
        for (size_t i = 0; i < expected.size(); ++i)
          ASSERT_EQ(std::memcmp(&got[size_t(b) * expected.size() + i], &expected[i], 4), 0)
              << weight_type_name(type) << " block " << b << " element " << i << ": " << got[size_t(b) * expected.size() + i]
              << " vs " << expected[i];
      }
    }
  }
}

TEST(Matmul, DotMatchesAcrossIsasForAllLengths) {
  std::mt19937 rng(99);
  std::uniform_real_distribution<float> value(-3.0f, 3.0f);
  for (int64_t n = 1; n <= 80; ++n) {
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    for (auto& v : a) v = value(rng);
    for (auto& v : b) v = value(rng);
    const float expected = dot_f32(a.data(), b.data(), n, Isa::Scalar);
    for (Isa isa : supported_isas()) {
      const float got = dot_f32(a.data(), b.data(), n, isa);
      ASSERT_EQ(std::memcmp(&got, &expected, 4), 0) << "n " << n << " isa " << isa_name(isa);
    }
  }
}

TEST(PortableMath, ExpIsAccurateAndHasDefinedEdges) {
  double worst_ulps = 0;
  for (float x = -86.0f; x <= 88.0f; x += 0.0137f) {
    const double exact = std::exp(double(x));
    const float got = exp_f32(x);
    const double ulp = std::ldexp(1.0, std::ilogb(float(exact)) - 23);
    worst_ulps = std::max(worst_ulps, std::abs(double(got) - exact) / ulp);
  }
  EXPECT_LT(worst_ulps, 2.0);
  EXPECT_EQ(exp_f32(0.0f), 1.0f);
  EXPECT_EQ(exp_f32(-INFINITY), 0.0f);
  EXPECT_EQ(exp_f32(-100.0f), 0.0f);
  EXPECT_TRUE(std::isinf(exp_f32(100.0f)));
  EXPECT_TRUE(std::isnan(exp_f32(NAN)));
}

TEST(PortableMath, DoubleHelpersAreAccurate) {
  for (double x : {1e-3, 0.5, 1.0, 2.0, 10.0, 10000.0, 1e6}) EXPECT_NEAR(log_f64(x), std::log(x), 1e-15 * std::max(1.0, std::abs(std::log(x))));
  for (double x : {-20.0, -1.0, -1e-3, 0.0, 0.3, 5.0, 40.0}) EXPECT_NEAR(exp_f64(x) / std::exp(x), 1.0, 1e-15);
  for (double x = 0; x < 5000.0; x += 3.7) {
    double s, c;
    sincos_f64(x, &s, &c);
    EXPECT_NEAR(s, std::sin(x), 1e-12);
    EXPECT_NEAR(c, std::cos(x), 1e-12);
  }
}

// SwiGLU is most of a small model's element-wise time; its AVX-512 path must
// give the scalar definition's bits everywhere exp_f32 has an edge (overflow
// past 88, flush below -86, NaN), on subnormals and zeros, and in the masked tail.
TEST(Ops, SwigluSameBitsForEveryIsa) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> wide(-100.0f, 100.0f), narrow(-4.0f, 4.0f);
  std::vector<float> gate, up;
  for (float edge : {0.0f, -0.0f, 88.0f, 88.01f, -86.0f, -86.01f, 1e-40f, -1e-40f, std::nanf(""), 3.4e38f, -3.4e38f}) {
    gate.push_back(edge);
    up.push_back(narrow(rng));
  }
  for (int i = 0; i < 1000; ++i) {
    gate.push_back(i % 2 ? wide(rng) : narrow(rng));
    up.push_back(narrow(rng));
  }
  for (int64_t n : {int64_t(gate.size()), int64_t(1), int64_t(15), int64_t(17), int64_t(33)}) {
    std::vector<float> expected(size_t(n), 0.0f);
    swiglu(gate.data(), up.data(), expected.data(), n, Isa::Scalar);
    for (Isa isa : test::supported_isas()) {
      std::vector<float> got(gate.begin(), gate.begin() + n);  // in place, as the forward pass calls it
      swiglu(got.data(), up.data(), got.data(), n, isa);
      EXPECT_EQ(0, std::memcmp(got.data(), expected.data(), size_t(n) * 4)) << isa_name(isa) << " n=" << n;
    }
  }
  // One hand-checked value: silu(1) * 2 = 2 / (1 + e^-1).
  float out = 0, g = 1.0f, u = 2.0f;
  swiglu(&g, &u, &out, 1, Isa::Scalar);
  EXPECT_NEAR(out, 2.0 / (1.0 + std::exp(-1.0)), 1e-6);
}

TEST(RopeTable, MatchesLibmWithinRounding) {
  RopeTable table(64, 10000.0);
  std::vector<float> c(32), s(32);
  for (int64_t pos : {0, 1, 17, 511, 4095}) {
    table.angles(pos, c.data(), s.data());
    for (int i = 0; i < 32; ++i) {
      const double angle = double(pos) * std::pow(10000.0, -2.0 * i / 64.0);
      EXPECT_NEAR(c[size_t(i)], std::cos(angle), 1e-6) << pos << " " << i;
      EXPECT_NEAR(s[size_t(i)], std::sin(angle), 1e-6) << pos << " " << i;
    }
  }
}

// Head widths below, at and between the 16 dot-product lanes (the AVX-512
// kernel reduces 16 keys' lanes together, a masked tail included), and every
// length of a last block.
TEST(Attention, SameBitsForEveryIsaAndMatchesSoftmax) {
  for (const int head_dim : {8, 16, 24, 64, 80, 128}) {
    std::mt19937 rng(5);
    std::normal_distribution<float> value(0.0f, 1.0f);
    const int64_t positions = 100;  // crosses three block boundaries
    std::vector<float> k(static_cast<size_t>(positions * head_dim)), v(k.size()), q(static_cast<size_t>(head_dim));
    for (auto& x : k) x = value(rng);
    for (auto& x : v) x = value(rng);
    for (auto& x : q) x = value(rng);
    const KvLayout kv{k.data(), v.data(), head_dim, 0};
    for (int64_t pos = 0; pos < positions; ++pos) {
      std::vector<float> expected(static_cast<size_t>(head_dim));
      attention_head(q.data(), kv, head_dim, pos, 0.2f, expected.data(), Isa::Scalar);
      for (Isa isa : supported_isas()) {
        std::vector<float> out(static_cast<size_t>(head_dim));
        attention_head(q.data(), kv, head_dim, pos, 0.2f, out.data(), isa);
        ASSERT_EQ(std::memcmp(out.data(), expected.data(), out.size() * 4), 0)
            << isa_name(isa) << " head_dim " << head_dim << " position " << pos;
      }
      if (pos % 16 != 15 && pos != 0) continue;
      // Against a plain double softmax.
      std::vector<double> w(static_cast<size_t>(pos + 1));
      double max_s = -1e300, total = 0;
      for (int64_t j = 0; j <= pos; ++j) {
        double s = 0;
        for (int d = 0; d < head_dim; ++d) s += double(q[size_t(d)]) * k[size_t(j * head_dim + d)];
        w[size_t(j)] = s * 0.2;
        max_s = std::max(max_s, w[size_t(j)]);
      }
      for (auto& x : w) total += (x = std::exp(x - max_s));
      for (int d = 0; d < head_dim; ++d) {
        double o = 0;
        for (int64_t j = 0; j <= pos; ++j) o += w[size_t(j)] / total * v[size_t(j * head_dim + d)];
        EXPECT_NEAR(expected[size_t(d)], o, 1e-5) << "head_dim " << head_dim << " position " << pos;
      }
    }
  }
}

TEST(PortableMath, TanhGeluAndSoftcapAreAccurate) {
  for (float x = -20.0f; x <= 20.0f; x += 0.0137f) {
    EXPECT_NEAR(tanh_f32(x), std::tanh(double(x)), 2e-7 + 2e-7 * std::fabs(std::tanh(double(x)))) << x;
    const double g = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * double(x) * x * x)));
    EXPECT_NEAR(gelu_tanh_f32(x), g, 1e-6 * std::max(1.0, std::fabs(g))) << x;
    EXPECT_NEAR(softcap_f32(x, 5.0f), 5.0 * std::tanh(x / 5.0), 2e-6) << x;
  }
  // Small arguments keep their relative accuracy (the polynomial branch).
  for (float x : {1e-30f, 1e-8f, 1e-4f, 0.3f, 0.6249f})
    EXPECT_NEAR(tanh_f32(x) / x, std::tanh(double(x)) / x, 3e-7) << x;
  EXPECT_EQ(tanh_f32(100.0f), 1.0f);
  EXPECT_EQ(tanh_f32(-100.0f), -1.0f);
  EXPECT_EQ(std::bit_cast<uint32_t>(tanh_f32(-0.0f)), 0x80000000u);
  EXPECT_EQ(gelu_tanh_f32(-30.0f), -0.0f);
  EXPECT_EQ(gelu_tanh_f32(30.0f), 30.0f);
}

// A sliding window visits only keys in (p - w, p], entering the first block
// at p - w + 1; soft-capping bends every score. Same bits on every ISA, and
// keys outside the window cannot matter.
TEST(Attention, WindowAndSoftcapSameBitsForEveryIsaAndIgnoreOutsideKeys) {
  std::mt19937 rng(9);
  std::normal_distribution<float> value(0.0f, 2.0f);
  const int head_dim = 20;
  const int64_t positions = 130;
  std::vector<float> k(static_cast<size_t>(positions * head_dim)), v(k.size()), q(static_cast<size_t>(head_dim));
  for (auto& x : k) x = value(rng);
  for (auto& x : v) x = value(rng);
  for (auto& x : q) x = value(rng);
  const KvLayout kv{k.data(), v.data(), head_dim, 0};
  for (const AttentionExtras extras : {AttentionExtras{40, 0.0f}, AttentionExtras{0, 1.5f}, AttentionExtras{33, 2.0f},
                                       AttentionExtras{1, 0.0f}}) {
    for (int64_t pos : {0, 5, 32, 39, 40, 41, 64, 72, 96, 129}) {
      std::vector<float> expected(static_cast<size_t>(head_dim));
      attention_head(q.data(), kv, head_dim, pos, 0.3f, expected.data(), Isa::Scalar, extras);
      for (Isa isa : supported_isas()) {
        std::vector<float> out(static_cast<size_t>(head_dim));
        attention_head(q.data(), kv, head_dim, pos, 0.3f, out.data(), isa, extras);
        ASSERT_EQ(std::memcmp(out.data(), expected.data(), out.size() * 4), 0) << isa_name(isa) << " " << pos;
      }
      // Scramble every key and value the window hides: nothing changes.
      std::vector<float> k2 = k, v2 = v;
      const int64_t lo = first_visible(pos, extras.window);
      for (int64_t j = 0; j < lo; ++j)
        for (int d = 0; d < head_dim; ++d) k2[size_t(j * head_dim + d)] = v2[size_t(j * head_dim + d)] = 1e3f;
      std::vector<float> hidden(static_cast<size_t>(head_dim));
      attention_head(q.data(), KvLayout{k2.data(), v2.data(), head_dim, 0}, head_dim, pos, 0.3f, hidden.data(),
                     Isa::Scalar, extras);
      ASSERT_EQ(std::memcmp(hidden.data(), expected.data(), hidden.size() * 4), 0) << pos;
      // Against a plain double softmax over the window.
      std::vector<double> w;
      double max_s = -1e300, total = 0;
      for (int64_t j = lo; j <= pos; ++j) {
        double s = 0;
        for (int d = 0; d < head_dim; ++d) s += double(q[size_t(d)]) * k[size_t(j * head_dim + d)];
        s *= 0.3;
        if (extras.softcap > 0) s = extras.softcap * std::tanh(s / extras.softcap);
        w.push_back(s);
        max_s = std::max(max_s, s);
      }
      for (auto& x : w) total += (x = std::exp(x - max_s));
      for (int d = 0; d < head_dim; ++d) {
        double o = 0;
        for (int64_t j = lo; j <= pos; ++j) o += w[size_t(j - lo)] / total * v[size_t(j * head_dim + d)];
        EXPECT_NEAR(expected[size_t(d)], o, 1e-5 * 4);
      }
    }
  }
}

TEST(RopeTable, FrequencyFactorsAndLinearScaleDivideTheFrequencies) {
  const std::vector<float> factors = {1.0f, 1.0f, 2.5f, 8.0f};
  RopeTable table(8, 500000.0, factors, 0.25);
  std::vector<float> c(4), s(4);
  for (int64_t pos : {0, 3, 1000, 70000}) {
    table.angles(pos, c.data(), s.data());
    for (int i = 0; i < 4; ++i) {
      const double angle = double(pos) * std::pow(500000.0, -2.0 * i / 8.0) * 0.25 / factors[size_t(i)];
      EXPECT_NEAR(c[size_t(i)], std::cos(angle), 1e-6) << pos << " " << i;
      EXPECT_NEAR(s[size_t(i)], std::sin(angle), 1e-6) << pos << " " << i;
    }
  }
}

TEST(Float16, ConversionsRoundTripAndRoundToNearestEven) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(uint16_t(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), h) << std::hex << h;
  }
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);   // rounds up to infinity
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);   // largest finite
  EXPECT_EQ(f32_to_f16(1.0f + 0x1.0p-11f), 0x3c00);  // tie to even
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.5f)), 1.5f);
}

TEST(ThreadPool, RunsEveryTaskExactlyOnceAcrossManyJobs) {
  ThreadPool pool(3);
  for (int job = 0; job < 2000; ++job) {
    const size_t n = size_t(1 + job % 37);
    std::vector<std::atomic<int>> hits(n);
    pool.run(n, [&](size_t i) { hits[i].fetch_add(1); });
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "job " << job << " task " << i;
  }
}

TEST(ThreadPool, StartsItsWorkersWithTheFirstJobItHandsOut) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.size(), 3);
  EXPECT_EQ(pool.started(), 0);
  std::vector<int> hits(5, 0);
  pool.run(1, [&](size_t i) { ++hits[i]; });  // one task runs inline
  EXPECT_EQ(pool.started(), 0);
  EXPECT_EQ(pool.jobs_dispatched(), 0u);
  std::vector<std::atomic<int>> shared(64);
  pool.run(shared.size(), [&](size_t i) { shared[i].fetch_add(1); });
  EXPECT_EQ(pool.started(), 2);
  EXPECT_EQ(pool.jobs_dispatched(), 1u);
  for (size_t i = 0; i < shared.size(); ++i) EXPECT_EQ(shared[i].load(), 1) << "task " << i;
  EXPECT_EQ(hits[0], 1);
}

// Waits up to 5 s for the pool's sleeping workers to number n.
bool sleeping_becomes(const ThreadPool& pool, int n) {
  for (int i = 0; i < 500 && pool.sleeping() != n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return pool.sleeping() == n;
}

TEST(ThreadPool, ParkPutsSpinningWorkersToSleepAndTheNextRunWakesThem) {
  // Spinning for about a minute: only park() puts these workers to sleep soon.
  ThreadPool pool(3, /*spin_rounds=*/1 << 30);
  std::vector<std::atomic<int>> hits(64);
  const auto job = [&](size_t i) { hits[i].fetch_add(1); };
  pool.run(hits.size(), job);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(pool.sleeping(), 0) << "the workers should still be spinning";
  pool.park();
  EXPECT_TRUE(sleeping_becomes(pool, 2)) << pool.sleeping() << " of 2 workers asleep after park()";
  for (int job_no = 0; job_no < 50; ++job_no) pool.run(hits.size(), job);
  for (size_t i = 0; i < hits.size(); ++i) EXPECT_EQ(hits[i].load(), 51) << "task " << i;
  EXPECT_TRUE(sleeping_becomes(pool, 0)) << "a run() after park() should wake the workers, to spin again";
  pool.park();
  EXPECT_TRUE(sleeping_becomes(pool, 2));
}

}  // namespace
}  // namespace kvg
