#include "kernels/cpu/q8_panels.hpp"

#include <cstring>

namespace kvg {

void build_q8_panels(const Q8Activations& a, int lanes, int offset, Q8Panels& out) {
  out.lanes = lanes;
  out.offset = offset;
  out.n_panels = (a.n_tokens + lanes - 1) / lanes;
  out.groups = a.cols / 4;
  out.blocks = a.blocks();
  out.pairs = a.cols / 32;
  out.q.assign(size_t(out.n_panels * out.groups * lanes * 4), uint8_t(offset));
  out.dx.assign(size_t(out.n_panels * out.blocks * lanes), 0.0f);
  out.sum_pairs.assign(size_t(out.n_panels * out.pairs * lanes), 0);
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    const int64_t p = t / lanes, l = t % lanes;
    const int8_t* q = a.q_row(t);
    for (int64_t g = 0; g < out.groups; ++g) {
      uint8_t* dst = out.q.data() + ((p * out.groups + g) * lanes + l) * 4;
      for (int i = 0; i < 4; ++i) dst[i] = uint8_t(q[g * 4 + i] + offset);
    }
    for (int64_t b = 0; b < out.blocks; ++b) out.dx[size_t((p * out.blocks + b) * lanes + l)] = a.dx_row(t)[b];
    const int16_t* sums = a.sums16_row(t);
    for (int64_t k = 0; k < out.pairs; ++k)
      out.sum_pairs[size_t((p * out.pairs + k) * lanes + l)] =
          int32_t(uint32_t(uint16_t(sums[2 * k])) | (uint32_t(uint16_t(sums[2 * k + 1])) << 16));
  }
}

}  // namespace kvg
