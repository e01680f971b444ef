// Elements per block of each weight format, for the CUDA kernels' host and
// device code alike (kvg_kernels' weight_block_elements() cannot be called
// from here: kvg_kernels links the CUDA kernels, not the other way round).
#pragma once

#include "kernels/cpu/weights.hpp"

namespace kvg::cuda {

// 32 for the legacy quantized formats, 256 for the K formats, 1 for F32,
// F16 and BF16 (no blocks).
KVG_HOST_DEVICE constexpr int block_elements(WeightType t) {
  switch (t) {
    case WeightType::Q8_0:
    case WeightType::Q4_0:
    case WeightType::Q4_1:
    case WeightType::Q5_0:
    case WeightType::Q5_1: return 32;
    case WeightType::Q4_K:
    case WeightType::Q6_K:
    case WeightType::Q2_K:
    case WeightType::Q3_K:
    case WeightType::Q5_K: return 256;
    default: return 1;
  }
}

// Whether q8-portable-v1 multiplies this format with quantized activations
// (the block-quantized formats; F32, F16 and BF16 keep f32 arithmetic).
KVG_HOST_DEVICE constexpr bool block_quantized(WeightType t) { return block_elements(t) > 1; }

}  // namespace kvg::cuda
