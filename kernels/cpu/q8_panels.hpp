// Quantized activations re-laid out for the SIMD kernels of recipe
// q8-portable-v1: tokens side by side in panels of `lanes` (one SIMD lane
// per token), so one vector instruction multiplies 4 weights of a row with 4
// elements of every token of the panel. Built once per matmul_q8 call and
// shared by all threads; a pure copy of Q8Activations' integers and scales.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/activation_quant.hpp"

namespace kvg {

struct Q8Panels {
  int lanes = 0;   // tokens per panel (0: not built, the scalar kernel needs none)
  int offset = 0;  // stored byte = q + offset (128 where the dot product wants unsigned bytes)
  int64_t n_panels = 0, groups = 0, blocks = 0, pairs = 0;  // groups of 4 elements, blocks, pairs of 16-sums
  std::vector<uint8_t> q;           // panel p, group g, lane l: 4 bytes at ((p * groups + g) * lanes + l) * 4
  std::vector<float> dx;            // panel p, block b, lane l: (p * blocks + b) * lanes + l
  std::vector<int32_t> sum_pairs;   // panel p, pair k, lane l: int16 sums16[2k] (low half), sums16[2k+1] (high)

  const uint8_t* q_group(int64_t p, int64_t g) const { return q.data() + ((p * groups + g) * lanes) * 4; }
  const float* dx_block(int64_t p, int64_t b) const { return dx.data() + (p * blocks + b) * lanes; }
  const int32_t* sum_pair(int64_t p, int64_t k) const { return sum_pairs.data() + (p * pairs + k) * lanes; }
};

// Lanes past the last token hold q = 0, dx = 0, sums 0.
void build_q8_panels(const Q8Activations& a, int lanes, int offset, Q8Panels& out);

}  // namespace kvg
