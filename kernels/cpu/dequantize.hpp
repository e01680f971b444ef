// A weight row as fp32, decoded by the recipe's one formula per format
// (kernels/cpu/weight_decode.hpp): the embedding lookup and the reference
// the SIMD decoders are checked against.
#pragma once

#include <cstdint>

#include "kernels/cpu/weights.hpp"

namespace kvg {

// out[0..cols) = row r of W as fp32 (exact).
void dequantize_row(const WeightMatrix& w, int64_t r, float* out);

}  // namespace kvg
