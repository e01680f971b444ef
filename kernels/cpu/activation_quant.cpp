#include "kernels/cpu/activation_quant.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <string>

#include "common/error.hpp"

namespace kvg {

namespace {

// rne(clamp(v, -127, 127)): the same value as clamp(rne(v), -127, 127) (the
// bounds are integers), and defined for v = ±inf or NaN, which appear only
// when 127 / amax overflows (amax below ~3.7e-37): NaN gives -127, as x86
// maxps/minps with the bound second and CUDA's fmaxf/fminf do. Adding and
// subtracting 1.5 * 2^23 rounds |v| <= 127 to an integer, ties to even,
// without libm.
int round_clamped(float v) {
  v = v > -127.0f ? v : -127.0f;
  v = v < 127.0f ? v : 127.0f;
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return int((v + kMagic) - kMagic);
}

// The block's largest |x_i|: for finite values (and infinities) the order of
// the magnitudes' bit patterns is the order of the magnitudes, and an integer
// maximum is a loop the compiler vectorizes.
template <int kBlock>
float block_amax(const float* x) {
  uint32_t amax_bits = 0;
  for (int i = 0; i < kBlock; ++i) amax_bits = std::max(amax_bits, std::bit_cast<uint32_t>(x[i]) & 0x7fffffffu);
  return std::bit_cast<float>(amax_bits);
}

template <int kBlock>
float quantize_block(const float* x, int8_t* q) {
  const float amax = block_amax<kBlock>(x);
  if (amax == 0.0f) {
    for (int i = 0; i < kBlock; ++i) q[i] = 0;
    return 0.0f;
  }
  const float inv = 127.0f / amax;
  if (inv <= std::numeric_limits<float>::max()) {
    // Finite inv: |x_i * inv| <= 127 (1 + 2^-24)^2 < 127.5, so the clamp
    // cannot change a value and this loop (which vectorizes) is the same.
    constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: rounds |v| < 2^22 to an integer, ties to even
    for (int i = 0; i < kBlock; ++i) q[i] = int8_t(int((x[i] * inv + kMagic) - kMagic));
  } else {
    for (int i = 0; i < kBlock; ++i) q[i] = int8_t(round_clamped(x[i] * inv));
  }
  return amax / 127.0f;
}

}  // namespace

float quantize_activation_block(const float* x, int n, int8_t* q) {
  switch (n) {
    case 32: return quantize_block<32>(x, q);
    case 256: return quantize_block<256>(x, q);
    default: break;
  }
  throw Error(ErrorCode::InvalidArgument, "activation blocks are 32 or 256 elements, not " + std::to_string(n));
}

void quantize_activations(const float* x, int64_t x_stride, int64_t n_tokens, int64_t cols, int block,
                          ThreadPool& pool, Q8Activations& out) {
  out.block = block;
  out.cols = cols;
  out.n_tokens = n_tokens;
  out.q.resize(size_t(n_tokens * cols));
  out.dx.resize(size_t(n_tokens * (cols / block)));
  out.sums16.resize(size_t(n_tokens * (cols / 16)));
  // One task per thread, each a run of whole tokens.
  const int64_t n_tasks = std::min<int64_t>(n_tokens, pool.size());
  pool.run(size_t(n_tasks), [&](size_t task) {
    for (int64_t t = int64_t(task) * n_tokens / n_tasks; t < (int64_t(task) + 1) * n_tokens / n_tasks; ++t) {
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
    }
  });
}

}  // namespace kvg
