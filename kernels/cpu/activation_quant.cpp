#include "kernels/cpu/activation_quant.hpp"

#include <cmath>

namespace kvg {

namespace {

// rne(clamp(v, -127, 127)): the same value as clamp(rne(v), -127, 127) (the
// bounds are integers), and defined for v = ±inf or NaN, which appear only
// when 127 / amax overflows (amax below ~3.7e-37): NaN gives -127, as the
// SIMD max/min (second operand on NaN) and CUDA's fmaxf/fminf do. Adding and
// subtracting 1.5 * 2^23 rounds |v| <= 127 to an integer, ties to even,
// without libm.
int round_clamped(float v) {
  v = v > -127.0f ? v : -127.0f;
  v = v < 127.0f ? v : 127.0f;
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return int((v + kMagic) - kMagic);
}

}  // namespace

float quantize_activation_block(const float* x, int n, int8_t* q) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  if (amax == 0.0f) {
    for (int i = 0; i < n; ++i) q[i] = 0;
    return 0.0f;
  }
  const float inv = 127.0f / amax;
  for (int i = 0; i < n; ++i) q[i] = int8_t(round_clamped(x[i] * inv));
  return amax / 127.0f;
}

void quantize_activations(const float* x, int64_t x_stride, int64_t n_tokens, int64_t cols, int block,
                          ThreadPool& pool, Q8Activations& out) {
  out.block = block;
  out.cols = cols;
  out.n_tokens = n_tokens;
  out.q.resize(size_t(n_tokens * cols));
  out.dx.resize(size_t(n_tokens * (cols / block)));
  out.sums16.resize(size_t(n_tokens * (cols / 16)));
  pool.run(size_t(n_tokens), [&](size_t task) {
    const int64_t t = int64_t(task);
    int8_t* q = out.q.data() + t * cols;
    float* dx = out.dx.data() + t * out.blocks();
    for (int64_t b = 0; b < out.blocks(); ++b)
      dx[b] = quantize_activation_block(x + t * x_stride + b * block, block, q + b * block);
    int16_t* sums = out.sums16.data() + t * (cols / 16);
    for (int64_t j = 0; j < cols / 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += q[j * 16 + i];
      sums[j] = int16_t(sum);
    }
  });
}

}  // namespace kvg
