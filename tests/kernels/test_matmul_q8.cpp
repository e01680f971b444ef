// Recipe q8-portable-v1's matrix product (docs/recipe.md): the quantizer on
// hand-computed values, an independent per-element reading of the spec
// against the scalar kernel, every ISA and thread count against scalar,
// row independence inside a batch, and closeness to the exact product.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include "common/error.hpp"

#include "kernels/cpu/activation_quant.hpp"
#include "kernels/cpu/dequantize.hpp"
#include "kernels/cpu/float16.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/matmul_q8.hpp"
#include "tests/support/kernel_fixtures.hpp"

namespace kvg {
namespace {

using test::random_weights;
using test::supported_isas;

const WeightType kQ8Formats[] = {WeightType::Q8_0, WeightType::Q4_0, WeightType::Q4_1, WeightType::Q5_0,
                                 WeightType::Q5_1, WeightType::Q2_K, WeightType::Q3_K, WeightType::Q4_K,
                                 WeightType::Q5_K, WeightType::Q6_K};

struct Matrix {
  std::vector<uint8_t> data;
  WeightMatrix w;
};

Matrix random_matrix(WeightType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  Matrix m{random_weights(type, rows, cols, rng), {}};
  m.w = WeightMatrix{type, m.data.data(), rows, cols, m.data.size() / size_t(rows)};
  return m;
}

std::vector<float> random_activations(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> value(0.0f, 1.5f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = value(rng);
  return x;
}

// A random matrix and n_tokens random activation rows for it.
struct Problem {
  Matrix m;
  std::vector<float> x;
};

Problem random_problem(WeightType type, int64_t rows, int64_t cols, int64_t n_tokens, std::mt19937& rng) {
  Matrix m = random_matrix(type, rows, cols, rng);
  return {std::move(m), random_activations(n_tokens * cols, rng)};
}

std::vector<float> run(const WeightMatrix& w, const std::vector<float>& x, int64_t n_tokens, int threads, Isa isa) {
  ThreadPool pool(threads);
  std::vector<float> y(size_t(n_tokens * w.rows), -1.0f);
  matmul_q8(w, x.data(), w.cols, n_tokens, y.data(), w.rows, pool, isa);
  return y;
}

// ---- (c) the quantizer, on values whose results are worked out by hand ----

TEST(ActivationQuant, TiesRoundToEvenAndScaleIsAmaxOver127) {
  // amax 127: inv = 127 / 127 = 1 exactly, so q = rne(x) and ties are exact.
  float x[32] = {2.5f, 3.5f, -2.5f, -3.5f, 0.5f, -0.5f, 1.5f, 126.5f, -127.0f, 0.49999997f, 100.0f, -0.0f};
  int8_t q[32];
  const float dx = quantize_activation_block(x, 32, q);
  EXPECT_EQ(dx, 1.0f);  // 127 / 127
  const int expected[12] = {2, 4, -2, -4, 0, 0, 2, 126, -127, 0, 100, 0};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(q[i], expected[i]) << "element " << i;
  for (int i = 12; i < 32; ++i) EXPECT_EQ(q[i], 0);
}

TEST(ActivationQuant, AmaxFromANegativeElementAndRoundedProducts) {
  // amax = |-1| = 1: inv = 127; 0.5 * 127 = 63.5 (exact tie, to even 64),
  // 0.25 * 127 = 31.75 -> 32, 0.75 * 127 = 95.25 -> 95, -1 -> -127.
  float x[32] = {};
  x[0] = 0.5f, x[1] = -0.5f, x[2] = 0.25f, x[3] = 0.75f, x[4] = -1.0f;
  int8_t q[32];
  const float dx = quantize_activation_block(x, 32, q);
  EXPECT_EQ(dx, 1.0f / 127.0f);
  EXPECT_EQ(q[0], 64);
  EXPECT_EQ(q[1], -64);
  EXPECT_EQ(q[2], 32);
  EXPECT_EQ(q[3], 95);
  EXPECT_EQ(q[4], -127);
  for (int i = 5; i < 32; ++i) EXPECT_EQ(q[i], 0);
}

TEST(ActivationQuant, AllZeroBlockHasZeroScale) {
  float x[256] = {};
  x[7] = -0.0f;
  int8_t q[256];
  std::memset(q, 5, sizeof q);
  EXPECT_EQ(quantize_activation_block(x, 256, q), 0.0f);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(q[i], 0);
}

TEST(ActivationQuant, OverflowingInverseClampsTo127) {
  // amax = the smallest subnormal: 127 / amax overflows to +inf, x * inv is
  // ±inf and clamps to ±127; amax / 127 rounds to 0.
  const float tiny = std::numeric_limits<float>::denorm_min();
  float x[32];
  for (int i = 0; i < 32; ++i) x[i] = i % 2 ? -tiny : tiny;
  int8_t q[32];
  EXPECT_EQ(quantize_activation_block(x, 32, q), 0.0f);
  for (int i = 0; i < 32; ++i) ASSERT_EQ(q[i], i % 2 ? -127 : 127);
}

TEST(ActivationQuant, RowsBlocksAndSixteenSums) {
  // Two tokens of 64 elements in blocks of 32: token 1's second block is 4x
  // token 0's first, so it has the same q and 4x the scale.
  std::mt19937 rng(3);
  std::vector<float> x = random_activations(128, rng);
  for (int i = 0; i < 32; ++i) x[size_t(64 + 32 + i)] = 4.0f * x[size_t(i)];
  ThreadPool pool(2);
  Q8Activations a;
  quantize_activations(x.data(), 64, 2, 64, 32, pool, a);
  ASSERT_EQ(a.blocks(), 2);
  EXPECT_EQ(a.dx_row(1)[1], 4.0f * a.dx_row(0)[0]);
  EXPECT_EQ(0, std::memcmp(a.q_row(1) + 32, a.q_row(0), 32));
  for (int64_t t = 0; t < 2; ++t)
    for (int j = 0; j < 4; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += a.q_row(t)[j * 16 + i];
      EXPECT_EQ(a.sums16_row(t)[j], sum);
    }
}

// ---- (d) the spec's table, read independently of the kernels ----------------

// One block's integer parts per element, decoded in whole-block loops the way
// the formats are usually described (not the kernels' per-element indexing):
// I1 = Σ_i scale(i) * v(i) * q(i) and I2 = Σ_i min(i) * q(i), which equal the
// spec's sums over sub-blocks because integer arithmetic is exact.
struct SpecBlock {
  int v[256], scale[256], min[256];
  float d = 0, d2 = 0;
};

SpecBlock spec_block(WeightType type, const uint8_t* x) {
  SpecBlock s;
  for (int i = 0; i < 256; ++i) s.scale[i] = 1, s.min[i] = 0;
  auto h = [&](int at) { uint16_t v; std::memcpy(&v, x + at, 2); return f16_to_f32(v); };
  auto scale_min_k4 = [&](const uint8_t* sc, int j, int& sv, int& mv) {
    if (j < 4) { sv = sc[j] & 63; mv = sc[j + 4] & 63; }
    else { sv = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4); mv = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4); }
  };
  switch (type) {
    case WeightType::Q8_0:
      s.d = h(0);
      for (int i = 0; i < 32; ++i) s.v[i] = int8_t(x[2 + i]);
      break;
    case WeightType::Q4_0:
    case WeightType::Q4_1: {
      const bool q41 = type == WeightType::Q4_1;
      s.d = h(0), s.d2 = q41 ? h(2) : 0.0f;
      const uint8_t* qs = x + (q41 ? 4 : 2);
      for (int j = 0; j < 16; ++j) {
        s.v[j] = (qs[j] & 15) - (q41 ? 0 : 8);
        s.v[j + 16] = (qs[j] >> 4) - (q41 ? 0 : 8);
      }
      if (q41) for (int i = 0; i < 32; ++i) s.min[i] = 1;
      break;
    }
    case WeightType::Q5_0:
    case WeightType::Q5_1: {
      const bool q51 = type == WeightType::Q5_1;
      s.d = h(0), s.d2 = q51 ? h(2) : 0.0f;
      uint32_t qh;
      std::memcpy(&qh, x + (q51 ? 4 : 2), 4);
      const uint8_t* qs = x + (q51 ? 8 : 6);
      for (int j = 0; j < 16; ++j) {
        s.v[j] = ((qs[j] & 15) | int(((qh >> j) & 1) << 4)) - (q51 ? 0 : 16);
        s.v[j + 16] = ((qs[j] >> 4) | int(((qh >> (j + 16)) & 1) << 4)) - (q51 ? 0 : 16);
      }
      if (q51) for (int i = 0; i < 32; ++i) s.min[i] = 1;
      break;
    }
    case WeightType::Q2_K: {
      s.d = h(80), s.d2 = h(82);
      int out = 0, is = 0;
      for (int n = 0; n < 2; ++n)
        for (int shift = 0; shift < 8; shift += 2)
          for (int half = 0; half < 2; ++half, ++is)
            for (int l = 0; l < 16; ++l, ++out) {
              s.v[out] = (x[16 + n * 32 + half * 16 + l] >> shift) & 3;
              s.scale[out] = x[is] & 15;
              s.min[out] = x[is] >> 4;
            }
      break;
    }
    case WeightType::Q3_K: {
      s.d = h(108);
      const uint8_t* sc = x + 96;
      int out = 0, is = 0;
      for (int n = 0; n < 2; ++n)
        for (int j = 0; j < 4; ++j)
          for (int half = 0; half < 2; ++half, ++is) {
            const int low4 = is < 8 ? sc[is] & 15 : sc[is - 8] >> 4;
            const int high2 = (sc[8 + is % 4] >> (2 * (is / 4))) & 3;
            for (int l = 0; l < 16; ++l, ++out) {
              const int li = half * 16 + l;
              const bool high_bit = (x[li] >> (n * 4 + j)) & 1;
              s.v[out] = ((x[32 + n * 32 + li] >> (2 * j)) & 3) - (high_bit ? 0 : 4);
              s.scale[out] = (low4 | (high2 << 4)) - 32;
            }
          }
      break;
    }
    case WeightType::Q4_K:
    case WeightType::Q5_K: {
      const bool q5 = type == WeightType::Q5_K;
      s.d = h(0), s.d2 = h(2);
      const uint8_t* ql = x + (q5 ? 48 : 16);
      for (int n = 0; n < 4; ++n)
        for (int nib = 0; nib < 2; ++nib) {
          int sv, mv;
          scale_min_k4(x + 4, 2 * n + nib, sv, mv);
          for (int l = 0; l < 32; ++l) {
            const int e = n * 64 + nib * 32 + l;
            const int low = nib ? ql[n * 32 + l] >> 4 : ql[n * 32 + l] & 15;
            s.v[e] = low + (q5 && ((x[16 + l] >> (2 * n + nib)) & 1) ? 16 : 0);
            s.scale[e] = sv, s.min[e] = mv;
          }
        }
      break;
    }
    case WeightType::Q6_K: {
      s.d = h(208);
      const int8_t* sc = reinterpret_cast<const int8_t*>(x + 192);
      for (int n = 0; n < 2; ++n)
        for (int l = 0; l < 32; ++l) {
          const uint8_t* ql = x + n * 64;
          const uint8_t qh = x[128 + n * 32 + l];
          const int e = n * 128 + l;
          s.v[e] = ((ql[l] & 15) | ((qh & 3) << 4)) - 32;
          s.v[e + 32] = ((ql[l + 32] & 15) | (((qh >> 2) & 3) << 4)) - 32;
          s.v[e + 64] = ((ql[l] >> 4) | (((qh >> 4) & 3) << 4)) - 32;
          s.v[e + 96] = ((ql[l + 32] >> 4) | (((qh >> 6) & 3) << 4)) - 32;
          for (int k = 0; k < 4; ++k) s.scale[e + 32 * k] = sc[n * 8 + l / 16 + 2 * k];
        }
      break;
    }
    default: ADD_FAILURE() << "not a q8 format";
  }
  return s;
}

// The spec's quantizer, with libm's nearbyint (round to nearest even).
float spec_quantize(const float* x, int n, int* q) {
  float amax = 0;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  if (amax == 0) {
    for (int i = 0; i < n; ++i) q[i] = 0;
    return 0.0f;
  }
  const float inv = 127.0f / amax;
  for (int i = 0; i < n; ++i) {
    const float p = x[i] * inv;
    q[i] = int(std::clamp(std::nearbyint(p), -127.0f, 127.0f));
  }
  return amax / 127.0f;
}

float spec_dot(const WeightMatrix& w, int64_t r, const float* x) {
  const int B = weight_block_elements(w.type), bytes = weight_block_bytes(w.type);
  const bool plus_sum = w.type == WeightType::Q4_1 || w.type == WeightType::Q5_1;
  const bool minus_mins = w.type == WeightType::Q2_K || w.type == WeightType::Q4_K || w.type == WeightType::Q5_K;
  float acc = 0.0f;
  for (int64_t b = 0; b < w.cols / B; ++b) {
    int q[256];
    const float dx = spec_quantize(x + b * B, B, q);
    const SpecBlock s = spec_block(w.type, w.row(r) + b * bytes);
    int64_t i1 = 0, i2 = 0;
    for (int i = 0; i < B; ++i) {
      i1 += int64_t(s.scale[i]) * s.v[i] * q[i];
      i2 += int64_t(s.min[i]) * q[i];
    }
    EXPECT_LT(std::abs(i1), int64_t(1) << 31);
    acc = std::fma(float(i1), s.d * dx, acc);
    if (plus_sum) acc = std::fma(float(i2), s.d2 * dx, acc);
    if (minus_mins) acc = std::fma(-float(i2), s.d2 * dx, acc);
  }
  return acc;
}

TEST(MatmulQ8, ScalarKernelIsTheSpecTable) {
  std::mt19937 rng(21);
  for (WeightType type : kQ8Formats) {
    const int64_t cols = weight_block_elements(type) == 32 ? 320 : 768, rows = 9, tokens = 3;
    const auto [m, x] = random_problem(type, rows, cols, tokens, rng);
    const auto y = run(m.w, x, tokens, 1, Isa::Scalar);
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t r = 0; r < rows; ++r) {
        const float expected = spec_dot(m.w, r, x.data() + t * cols);
        ASSERT_EQ(0, std::memcmp(&expected, &y[size_t(t * rows + r)], 4))
            << weight_type_name(type) << " row " << r << " token " << t << ": " << y[size_t(t * rows + r)]
            << " vs " << expected;
      }
  }
}

// ---- (a) every ISA, shape and thread count gives the scalar bits -----------

TEST(MatmulQ8, EveryIsaMatchesScalarForEveryFormatShapeAndThreadCount) {
  std::mt19937 rng(1234);
  struct Shape { int64_t rows, cols, tokens; };
  // Token counts on both sides of every few-token threshold
  // (q8_decode_max_tokens) and of the panel widths; rows not multiples of 4
  // or 8; for 32-blocks also odd block counts (kernels that take blocks in pairs).
  // Q8_0's row-pair kernel (AVX-512) takes 2..16 tokens in one or two 8-lane panels,
  // and the first 16 of 17..24 (q8_split_pairs; 25 is panels again).
  const std::vector<Shape> shapes = {{37, 256, 1}, {19, 512, 3},  {21, 512, 6},   {64, 256, 8},  {9, 256, 9},
                                     {13, 512, 16}, {5, 2304, 17}, {45, 512, 70}, {3, 2048, 2},
                                     {11, 256, 18}, {9, 256, 24}, {7, 256, 25}};
  const std::vector<Shape> odd_blocks = {{13, 96, 1}, {6, 160, 2}, {10, 160, 5}, {7, 96, 12}, {5, 160, 16}, {11, 224, 20}};
  for (WeightType type : kQ8Formats)
    for (const std::vector<Shape>& list : {shapes, weight_block_elements(type) == 32 ? odd_blocks : std::vector<Shape>{}})
      for (const Shape& s : list) {
        const auto [m, x] = random_problem(type, s.rows, s.cols, s.tokens, rng);
        const auto expected = run(m.w, x, s.tokens, 1, Isa::Scalar);
        for (Isa isa : supported_isas())
          for (int threads : {1, 2, 3}) {
            const auto y = run(m.w, x, s.tokens, threads, isa);
            ASSERT_EQ(0, std::memcmp(y.data(), expected.data(), y.size() * 4))
                << weight_type_name(type) << " " << s.rows << "x" << s.cols << " tokens " << s.tokens << " isa "
                << isa_name(isa) << " threads " << threads;
          }
      }
}

// ---- (b) a token's result does not depend on the batch around it -----------

TEST(MatmulQ8, TokenAloneEqualsTokenInsideABatchOf37) {
  std::mt19937 rng(77);
  for (WeightType type : kQ8Formats) {
    const int64_t cols = 512, rows = 23, tokens = 37;
    const auto [m, x] = random_problem(type, rows, cols, tokens, rng);
    for (Isa isa : supported_isas()) {
      const auto batch = run(m.w, x, tokens, 2, isa);
      for (int64_t t : {int64_t(0), int64_t(16), int64_t(36)}) {
        const std::vector<float> one(x.begin() + t * cols, x.begin() + (t + 1) * cols);
        const auto alone = run(m.w, one, 1, 1, isa);
        ASSERT_EQ(0, std::memcmp(alone.data(), batch.data() + t * rows, size_t(rows) * 4))
            << weight_type_name(type) << " isa " << isa_name(isa) << " token " << t;
      }
    }
  }
}

// ---- (e) close to the exact product of the weights and the unquantized x ---

TEST(MatmulQ8, CloseToTheExactProduct) {
  // The error is the activation rounding: |x_i - q_i dx| <= dx / 2 with
  // dx = amax / 127 per block, so each block's term is off by at most
  // |w_block|_1 * amax / 254, a few 1e-3 of |w| |x| for Gaussian x, and the
  // errors of the blocks partly cancel. Measured on these matrices: 3e-4 to
  // 8e-4 for every format. 2 % leaves room for any row, and a wrong scale,
  // sign, min or sub-block mapping gives errors of order 10 to 100 %.
  std::mt19937 rng(5);
  for (WeightType type : kQ8Formats) {
    const int64_t cols = 1024, rows = 16, tokens = 4;
    const auto [m, x] = random_problem(type, rows, cols, tokens, rng);
    const auto y = run(m.w, x, tokens, 1, Isa::Scalar);
    double worst = 0;
    std::vector<float> wr(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(m.w, r, wr.data());
      for (int64_t t = 0; t < tokens; ++t) {
        double exact = 0, ww = 0, xx = 0;
        for (int64_t k = 0; k < cols; ++k) {
          const double xv = x[size_t(t * cols + k)];
          exact += double(wr[size_t(k)]) * xv;
          ww += double(wr[size_t(k)]) * wr[size_t(k)];
          xx += xv * xv;
        }
        const double rel = std::abs(y[size_t(t * rows + r)] - exact) / std::sqrt(ww * xx);
        worst = std::max(worst, rel);
      }
    }
    EXPECT_LT(worst, 0.02) << weight_type_name(type);
  }
}

TEST(MatmulQ8, FloatFormatsForwardToMatmul) {
  std::mt19937 rng(8);
  for (WeightType type : {WeightType::F32, WeightType::F16, WeightType::BF16}) {
    EXPECT_FALSE(q8_applies(type));
    const auto [m, x] = random_problem(type, 7, 48, 2, rng);
    ThreadPool pool(1);
    std::vector<float> expected(14);
    matmul(m.w, x.data(), 48, 2, expected.data(), 7, pool, Isa::Scalar);
    const auto y = run(m.w, x, 2, 1, Isa::Scalar);
    EXPECT_EQ(0, std::memcmp(y.data(), expected.data(), 14 * 4)) << weight_type_name(type);
  }
  for (WeightType type : kQ8Formats) {
    EXPECT_TRUE(q8_applies(type));
    EXPECT_EQ(q8_activation_block(type), weight_block_elements(type));
  }
}

// ---- products of one input: quantized once, the bits of each alone ----------

// Three matrices of one input (q, k and v of a layer: rows differ, widths
// equal) through matmul_q8_same_input equal each through matmul_q8, bit
// for bit, for every format, ISA, thread count and token count around the
// kernels' paths (one row per lane, row pairs, the split at 17..24 where
// each product quantizes its own parts, panels); the input is quantized
// once for the three, except where the split or a format that differs
// makes each product its own.
TEST(MatmulQ8, ProductsOfOneInputEqualEachAloneAndQuantizeItOnce) {
  std::mt19937 rng(4242);
  const int64_t cols = 512;
  for (WeightType type : kQ8Formats)
    for (int64_t tokens : {1, 2, 5, 11, 16, 17, 24, 25, 40}) {
      const Matrix q = random_matrix(type, 24, cols, rng), k = random_matrix(type, 8, cols, rng),
                   v = random_matrix(type, 13, cols, rng);
      const std::vector<float> x = random_activations(tokens * cols, rng);
      for (Isa isa : supported_isas())
        for (int threads : {1, 2}) {
          ThreadPool pool(threads);
          std::vector<float> yq(size_t(tokens * 24), -1.0f), yk(size_t(tokens * 8), -1.0f),
              yv(size_t(tokens * 13), -1.0f);
          const Q8Product products[] = {{&q.w, yq.data(), 24}, {&k.w, yk.data(), 8}, {&v.w, yv.data(), 13}};
          const uint64_t before = q8_activation_quantizations();
          matmul_q8_same_input(products, x.data(), cols, tokens, pool, isa);
          const uint64_t quantized = q8_activation_quantizations() - before;
          const bool split = isa == Isa::Avx512 && type == WeightType::Q8_0 && tokens > 16 && tokens <= 24 &&
                             __builtin_cpu_supports("avx512vnni");
          EXPECT_EQ(quantized, split ? 6u : 1u)
              << weight_type_name(type) << " tokens " << tokens << " isa " << isa_name(isa);
          for (const auto& [m, y] : {std::pair{&q, &yq}, std::pair{&k, &yk}, std::pair{&v, &yv}}) {
            const auto alone = run(m->w, x, tokens, threads, isa);
            ASSERT_EQ(0, std::memcmp(alone.data(), y->data(), alone.size() * 4))
                << weight_type_name(type) << " " << m->w.rows << " rows, tokens " << tokens << " isa "
                << isa_name(isa) << " threads " << threads;
          }
        }
    }
}

// Matrices of different formats share no quantization (their blocks may
// differ): each is its own product, with its own bits.
TEST(MatmulQ8, ProductsOfOneInputInDifferentFormatsQuantizeEach) {
  std::mt19937 rng(99);
  const int64_t cols = 256, tokens = 5;
  const Matrix a = random_matrix(WeightType::Q8_0, 16, cols, rng), b = random_matrix(WeightType::Q4_K, 16, cols, rng);
  const std::vector<float> x = random_activations(tokens * cols, rng);
  ThreadPool pool(1);
  std::vector<float> ya(size_t(tokens * 16)), yb(size_t(tokens * 16));
  const Q8Product products[] = {{&a.w, ya.data(), 16}, {&b.w, yb.data(), 16}};
  const uint64_t before = q8_activation_quantizations();
  matmul_q8_same_input(products, x.data(), cols, tokens, pool, Isa::Scalar);
  EXPECT_EQ(q8_activation_quantizations() - before, 2u);
  EXPECT_EQ(0, std::memcmp(run(a.w, x, tokens, 1, Isa::Scalar).data(), ya.data(), ya.size() * 4));
  EXPECT_EQ(0, std::memcmp(run(b.w, x, tokens, 1, Isa::Scalar).data(), yb.data(), yb.size() * 4));
}

TEST(MatmulQ8, RefusesPartialBlocks) {
  std::vector<uint8_t> data(34 * 2);
  const WeightMatrix w{WeightType::Q8_0, data.data(), 1, 48, 68};
  std::vector<float> x(48), y(1);
  ThreadPool pool(1);
  try {
    matmul_q8(w, x.data(), 48, 1, y.data(), 1, pool, Isa::Scalar);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not whole blocks of 32"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvg
